// ReplicaLog: see replica_log.h.
#include "pserver/replica_log.h"

#include <algorithm>

namespace tessera {

void ConsistencyStateToWire(const Consistency::State& s, wire::ConsistencyState* w) {
  w->set_version(s.version);
  w->set_started(s.started);
  w->set_clock_floor(s.clock_floor);
  for (const auto& t : s.trainers) {
    auto* x = w->add_trainers();
    x->set_trainer(t.trainer);
    x->set_member(t.member);
    x->set_epoch(t.epoch);
    x->set_start(t.start);
    x->set_last_epoch(t.last_epoch);
    x->set_last_step(t.last_step);
  }
}

Consistency::State ConsistencyStateFromWire(const wire::ConsistencyState& w) {
  Consistency::State s;
  s.version = w.version();
  s.started = w.started();
  s.clock_floor = w.clock_floor();
  for (const auto& x : w.trainers()) {
    s.trainers.push_back({x.trainer(), x.member(), x.epoch(), x.start(), x.last_epoch(), x.last_step()});
  }
  return s;
}

void ReplicaLog::SetOutbox(ReplicaOutbox* outbox, Consistency::State now) {
  outbox_ = outbox;
  published_ = std::move(now);
}

void ReplicaLog::RecordDense(const std::string& param, int64_t block, const float* grad, int64_t count) {
  if (!outbox_) return;
  auto* seg = record_.add_push();
  seg->set_param(param);
  seg->set_block(block);
  seg->set_count(count);
  payload_.append(reinterpret_cast<const char*>(grad), static_cast<size_t>(count) * sizeof(float));
}

void ReplicaLog::RecordSparse(const std::string& table, std::span<const uint64_t> keys, const float* rows,
                              int64_t floats) {
  if (!outbox_) return;
  auto* seg = record_.add_push();
  seg->set_param(table);
  seg->set_block(-1);
  seg->set_count(static_cast<int64_t>(keys.size()));
  for (uint64_t k : keys) seg->add_keys(k);
  payload_.append(reinterpret_cast<const char*>(rows), static_cast<size_t>(floats) * sizeof(float));
}

void ReplicaLog::Discard() {
  record_.Clear();
  payload_.clear();
}

void ReplicaLog::Publish(Consistency::State state, int64_t epoch) {
  if (!outbox_) return Discard();
  if (record_.push_size() == 0 && state == published_) return;
  auto m = std::make_shared<ReplicaMessage>();
  m->seq = ++seq_;
  record_.set_op(wire::DataRequest::REPLICATE);
  record_.set_job_token(job_token_);
  record_.set_pserver_index(index_);
  auto* rec = record_.mutable_replica();
  rec->set_seq(m->seq);
  rec->set_primary_epoch(epoch);
  rec->set_scale(scale_);
  ConsistencyStateToWire(state, rec->mutable_state());
  record_.SerializeToString(&m->header);
  m->payload.swap(payload_);
  Discard();
  published_ = std::move(state);
  if (!outbox_->Publish(std::move(m))) committed_ = seq_;
}

std::shared_ptr<const ReplicaMessage> ReplicaLog::SnapshotRecord(const Consistency::State& state,
                                                                 int64_t epoch,
                                                                 std::string checkpoint) const {
  wire::DataRequest req;
  req.set_op(wire::DataRequest::REPLICATE);
  req.set_job_token(job_token_);
  req.set_pserver_index(index_);
  auto* rec = req.mutable_replica();
  rec->set_seq(seq_);
  rec->set_primary_epoch(epoch);
  ConsistencyStateToWire(state, rec->mutable_state());
  rec->set_snapshot(true);
  auto m = std::make_shared<ReplicaMessage>();
  m->seq = seq_;
  m->payload = std::move(checkpoint);
  req.SerializeToString(&m->header);
  return m;
}

bool ReplicaLog::Commit(int64_t seq) {
  if (seq <= committed_) return false;
  committed_ = std::min(seq, seq_);
  return true;
}

void ReplicaLog::Promote(Consistency::State now) {
  seq_ = 0;
  committed_ = 0;
  primary_epoch_ = 0;
  published_ = std::move(now);
}

}  // namespace tessera
