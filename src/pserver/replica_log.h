// ReplicaLog: a shard's replication record (--replicas > 1), as its primary writes it and its
// backup follows it. A primary records the store calls an event makes (the gradients applied and
// their scale) and publishes them, with the consistency state after the event, as one numbered
// record to its outbox (the shell's ordered streams, one per backup); answers that depend on a
// record are held (HeldReplies) until every backup has acknowledged it (Commit). A backup keeps
// the last record it applied and the newest primary it heard from. Pure: no locks, threads or
// I/O (the service's lock guards it, because a record must match the state it was taken from).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pserver/consistency.h"
#include "tessera/data.pb.h"

namespace tessera {

// One record of a shard's replication stream, serialized once and sent to every backup: a
// REPLICATE request header and its payload (the gradients applied, or a snapshot's checkpoint).
struct ReplicaMessage {
  int64_t seq = 0;
  std::string header;
  std::string payload;
};

// Where a primary's replication records go: the shell's ordered streams, one per backup.
class ReplicaOutbox {
 public:
  virtual ~ReplicaOutbox() = default;
  // Queues `m` on every attached stream, in order. Called under the service's lock: must not
  // block or call back into the service. Returns false when no stream is attached (the record
  // then counts at once).
  virtual bool Publish(std::shared_ptr<const ReplicaMessage> m) = 0;
};

void ConsistencyStateToWire(const Consistency::State& s, wire::ConsistencyState* w);
Consistency::State ConsistencyStateFromWire(const wire::ConsistencyState& w);

class ReplicaLog {
 public:
  ReplicaLog(std::string job_token, int index) : job_token_(std::move(job_token)), index_(index) {}

  // ---- Primary ----
  // Where records go from now on (null: nowhere), and the state they start from.
  void SetOutbox(ReplicaOutbox* outbox, Consistency::State now);
  // Whether store calls are recorded (an outbox is set).
  bool recording() const { return outbox_ != nullptr; }
  void RecordDense(const std::string& param, int64_t block, const float* grad, int64_t count);
  void RecordSparse(const std::string& table, std::span<const uint64_t> keys, const float* rows,
                    int64_t floats);
  // The factor the recorded gradients are applied with.
  void SetScale(float scale) { scale_ = scale; }
  // Publishes what was recorded since the last record, with `state`, as record seq()+1 of
  // `epoch`, if anything was recorded or the state changed. A record no stream takes counts as
  // committed at once.
  void Publish(Consistency::State state, int64_t epoch);
  // Forgets what was recorded (a backup publishes nothing).
  void Discard();
  // A snapshot record of the shard: where a new backup starts (its seq is the last published).
  std::shared_ptr<const ReplicaMessage> SnapshotRecord(const Consistency::State& state, int64_t epoch,
                                                       std::string checkpoint) const;
  // Every backup has the records up to `seq` (at most the last published). Returns false when
  // that is nothing new.
  bool Commit(int64_t seq);
  bool uncommitted() const { return seq_ > committed_; }
  int64_t committed() const { return committed_; }

  // ---- Both ----
  // A primary's last record published; a backup's last record applied.
  int64_t seq() const { return seq_; }

  // ---- Backup ----
  int64_t primary_epoch() const { return primary_epoch_; }
  // Record `seq` of the primary of `primary_epoch` is applied.
  void Applied(int64_t seq, int64_t primary_epoch) {
    seq_ = seq;
    primary_epoch_ = primary_epoch;
  }
  // A backup taking over as primary: numbering starts again, from `now`.
  void Promote(Consistency::State now);

 private:
  const std::string job_token_;
  const int index_;
  ReplicaOutbox* outbox_ = nullptr;
  int64_t seq_ = 0;            // primary: the last record published; backup: applied
  int64_t committed_ = 0;      // primary: every backup has the records up to this
  int64_t primary_epoch_ = 0;  // backup: the newest primary heard from
  wire::DataRequest record_;   // the calls recorded since the last publish
  std::string payload_;
  float scale_ = 1.0f;
  Consistency::State published_;
};

// Answers held until the record they depend on is committed, in the order held. Pure.
template <class Reply>
class HeldReplies {
 public:
  // Holds every reply of `replies` (emptied) until record `seq` is committed.
  void Hold(int64_t seq, std::vector<Reply>* replies) {
    for (auto& r : *replies) held_.emplace_back(seq, std::move(r));
    replies->clear();
  }
  // The replies whose records are committed (`committed` and before), in the order held.
  std::vector<Reply> Release(int64_t committed) {
    size_t n = 0;
    while (n < held_.size() && held_[n].first <= committed) ++n;
    std::vector<Reply> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(std::move(held_[i].second));
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  // Every reply held (e.g. to fail them when serving stops).
  std::vector<Reply> TakeAll() { return Release(INT64_MAX); }
  size_t size() const { return held_.size(); }

 private:
  std::vector<std::pair<int64_t, Reply>> held_;  // (seq, reply), in order
};

}  // namespace tessera
