// PserverService (see pserver_service.h): replicas. A primary records the store calls each event
// makes and publishes them, with the consistency state after it, as one record to its backups'
// streams; answers that depend on a record wait until every backup has acknowledged it. A backup
// applies the records in order (the same calls with the same inputs: the same bits) and takes
// over with Promote().
#include <spdlog/spdlog.h>

#include "pserver/checkpoint_file.h"
#include "pserver/pserver_service.h"

namespace tessera {
namespace {

void StateToWire(const Consistency::State& s, wire::ConsistencyState* w) {
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

Consistency::State StateFromWire(const wire::ConsistencyState& w) {
  Consistency::State s;
  s.version = w.version();
  s.started = w.started();
  s.clock_floor = w.clock_floor();
  for (const auto& x : w.trainers()) {
    s.trainers.push_back({x.trainer(), x.member(), x.epoch(), x.start(), x.last_epoch(), x.last_step()});
  }
  return s;
}

}  // namespace

void PserverService::RecordDense(const std::string& param, int64_t block, const float* grad, int64_t count) {
  if (!outbox_) return;
  auto* seg = record_.add_push();
  seg->set_param(param);
  seg->set_block(block);
  seg->set_count(count);
  record_payload_.append(reinterpret_cast<const char*>(grad), static_cast<size_t>(count) * sizeof(float));
}

void PserverService::RecordSparse(const std::string& table, std::span<const uint64_t> keys, const float* rows,
                                  int64_t floats) {
  if (!outbox_) return;
  auto* seg = record_.add_push();
  seg->set_param(table);
  seg->set_block(-1);
  seg->set_count(static_cast<int64_t>(keys.size()));
  for (uint64_t k : keys) seg->add_keys(k);
  record_payload_.append(reinterpret_cast<const char*>(rows), static_cast<size_t>(floats) * sizeof(float));
}

void PserverService::PublishChanges() {
  if (!outbox_ || backup_) {
    record_.Clear();
    record_payload_.clear();
    return;
  }
  Consistency::State state = consistency_->Export();
  if (record_.push_size() == 0 && state == published_state_) return;
  auto m = std::make_shared<ReplicaMessage>();
  m->seq = ++seq_;
  record_.set_op(wire::DataRequest::REPLICATE);
  record_.set_job_token(options_.job.token);
  record_.set_pserver_index(options_.index);
  auto* rec = record_.mutable_replica();
  rec->set_seq(m->seq);
  rec->set_primary_epoch(epoch_.load());
  rec->set_scale(record_scale_);
  StateToWire(state, rec->mutable_state());
  record_.SerializeToString(&m->header);
  m->payload.swap(record_payload_);
  record_.Clear();
  record_payload_.clear();
  published_state_ = std::move(state);
  if (!outbox_->Publish(std::move(m))) committed_ = seq_;
}

void PserverService::HoldUntilCommitted(std::vector<Reply>* replies) {
  if (seq_ <= committed_ || backup_) return;
  for (auto& r : *replies) held_replies_.emplace_back(seq_, std::move(r));
  replies->clear();
}

void PserverService::Committed(int64_t seq) {
  std::vector<Reply> out;
  {
    MutexLock lock(&mu_);
    if (seq <= committed_) return;
    committed_ = std::min(seq, seq_);
    size_t n = 0;
    while (n < held_replies_.size() && held_replies_[n].first <= committed_) ++n;
    for (size_t i = 0; i < n; ++i) out.push_back(std::move(held_replies_[i].second));
    held_replies_.erase(held_replies_.begin(), held_replies_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  for (auto& r : out) Send(r);
}

int64_t PserverService::published() const {
  MutexLock lock(&mu_);
  return seq_;
}

bool PserverService::backup() const {
  MutexLock lock(&mu_);
  return backup_;
}

void PserverService::SetOutbox(ReplicaOutbox* outbox) {
  bool release;
  {
    MutexLock lock(&mu_);
    outbox_ = outbox;
    published_state_ = consistency_->Export();
    release = outbox == nullptr;
  }
  if (release) Committed(published());
}

Status PserverService::AttachBackup(
    const std::function<void(std::shared_ptr<const ReplicaMessage>)>& attach) {
  MutexLock lock(&mu_);
  if (backup_)
    return Status::FailedPrecondition("pserver " + std::to_string(options_.index) + " is a backup");
  if (!initialized_) {
    return Status::FailedPrecondition("shard " + std::to_string(options_.index) + " is not initialized yet");
  }
  wire::DataRequest req;
  req.set_op(wire::DataRequest::REPLICATE);
  req.set_job_token(options_.job.token);
  req.set_pserver_index(options_.index);
  auto* rec = req.mutable_replica();
  rec->set_seq(seq_);
  rec->set_primary_epoch(epoch_.load());
  StateToWire(consistency_->Export(), rec->mutable_state());
  rec->set_snapshot(true);
  auto m = std::make_shared<ReplicaMessage>();
  m->seq = seq_;
  m->payload = EncodeCheckpoint(SnapshotLocked());
  req.SerializeToString(&m->header);
  attach(std::move(m));
  return Status::OK();
}

Status PserverService::Promote(int64_t epoch) {
  MutexLock lock(&mu_);
  if (!backup_) return Status::OK();
  if (!initialized_) {
    return Status::FailedPrecondition("the backup of shard " + std::to_string(options_.index) +
                                      " never received it from its primary");
  }
  backup_ = false;
  epoch_ = epoch;
  seq_ = 0;
  committed_ = 0;
  primary_epoch_ = 0;
  published_state_ = consistency_->Export();
  spdlog::info("pserver {}: this backup takes over as the shard's primary at version {} (epoch {})",
               options_.index, consistency_->version(), epoch);
  return Status::OK();
}

void PserverService::HandleReplicate(const wire::DataRequest& req, ConstBuffer payload,
                                     std::unique_ptr<Responder> r) {
  const auto& rec = req.replica();
  const std::string shard = "shard " + std::to_string(options_.index);
  std::optional<Checkpoint> snapshot;
  if (rec.snapshot()) {
    auto c = DecodeCheckpoint(std::string_view(static_cast<const char*>(payload.data), payload.size),
                              "the snapshot of " + shard);
    if (!c.ok()) return SendError(*r, c.status(), wire::DataReply::BAD_REQUEST);
    snapshot = std::move(*c);
  }
  Reply ack;
  {
    MutexLock lock(&mu_);
    if (!backup_) {
      return SendError(*r,
                       Status::FailedPrecondition("pserver " + std::to_string(options_.index) +
                                                  " is this shard's primary (epoch " +
                                                  std::to_string(epoch_.load()) + "); it takes no records"),
                       wire::DataReply::STALE_EPOCH);
    }
    if (rec.primary_epoch() < primary_epoch_) {
      return SendError(*r,
                       Status::FailedPrecondition("a record of " + shard + " from a former primary (epoch " +
                                                  std::to_string(rec.primary_epoch()) + "; now " +
                                                  std::to_string(primary_epoch_) + ")"),
                       wire::DataReply::STALE_EPOCH);
    }
    if (snapshot) {
      if (Status s = store_.Restore(snapshot->shard); !s.ok()) {
        return SendError(*r, s.WithContext("the snapshot of " + shard), wire::DataReply::BAD_REQUEST);
      }
    } else {
      if (!initialized_ || rec.primary_epoch() != primary_epoch_ || rec.seq() != seq_ + 1) {
        return SendError(
            *r,
            Status::OutOfRange(shard + ": expected record " + std::to_string(seq_ + 1) + " of epoch " +
                               std::to_string(primary_epoch_) + ", got record " + std::to_string(rec.seq()) +
                               " of epoch " + std::to_string(rec.primary_epoch()) + ": send a snapshot"),
            wire::DataReply::NONE);
      }
      auto list = SegmentList::Read(store_, req.push(), SegmentList::Use::kPush);
      Status s = list.status();
      if (s.ok()) s = list->CheckPayload(payload.size);
      if (!s.ok())
        return SendError(*r, s.WithContext("record " + std::to_string(rec.seq()) + " of " + shard),
                         wire::DataReply::BAD_REQUEST);
      ApplyPush(*list, static_cast<const float*>(payload.data), rec.scale());
    }
    consistency_ = std::make_unique<Consistency>(ConsistencyOptions(), StateFromWire(rec.state()));
    initialized_ = true;
    seq_ = rec.seq();
    primary_epoch_ = rec.primary_epoch();
    ack.header.set_version(consistency_->version());
  }
  ack.responder = std::move(r);
  Send(ack);
}

}  // namespace tessera
