// PserverService (see pserver_service.h): replicas. A primary records the store calls each event
// makes and publishes them, with the consistency state after it, as one record to its backups'
// streams; answers that depend on a record wait until every backup has acknowledged it. A backup
// applies the records in order (the same calls with the same inputs: the same bits) and takes
// over with Promote().
#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_file.h"
#include "pserver/pserver_service.h"

namespace tessera {

void PserverService::PublishChanges() {
  // Without an outbox (no replicas, the common case) nothing is recorded and the consistency
  // state is not exported: this runs after every request.
  if (backup_ || !replicas_.recording()) return replicas_.Discard();
  replicas_.Publish(consistency_->Export(), epoch_.load());
}

void PserverService::HoldUntilCommitted(std::vector<Reply>* replies) {
  if (!replicas_.uncommitted() || backup_) return;
  held_replies_.Hold(replicas_.seq(), replies);
}

void PserverService::Committed(int64_t seq) {
  std::vector<Reply> out;
  {
    MutexLock lock(&mu_);
    if (!replicas_.Commit(seq)) return;
    out = held_replies_.Release(replicas_.committed());
  }
  for (auto& r : out) Send(r);
}

int64_t PserverService::published() const {
  MutexLock lock(&mu_);
  return replicas_.seq();
}

bool PserverService::backup() const {
  MutexLock lock(&mu_);
  return backup_;
}

void PserverService::SetOutbox(ReplicaOutbox* outbox) {
  bool release;
  {
    MutexLock lock(&mu_);
    replicas_.SetOutbox(outbox, consistency_->Export());
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
  attach(replicas_.SnapshotRecord(consistency_->Export(), epoch_.load(), EncodeCheckpoint(SnapshotLocked())));
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
  replicas_.Promote(consistency_->Export());
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
    if (rec.primary_epoch() < replicas_.primary_epoch()) {
      return SendError(*r,
                       Status::FailedPrecondition("a record of " + shard + " from a former primary (epoch " +
                                                  std::to_string(rec.primary_epoch()) + "; now " +
                                                  std::to_string(replicas_.primary_epoch()) + ")"),
                       wire::DataReply::STALE_EPOCH);
    }
    if (snapshot) {
      if (Status s = store_.Restore(snapshot->shard); !s.ok()) {
        return SendError(*r, s.WithContext("the snapshot of " + shard), wire::DataReply::BAD_REQUEST);
      }
    } else {
      if (!initialized_ || rec.primary_epoch() != replicas_.primary_epoch() ||
          rec.seq() != replicas_.seq() + 1) {
        return SendError(
            *r,
            Status::OutOfRange(shard + ": expected record " + std::to_string(replicas_.seq() + 1) +
                               " of epoch " + std::to_string(replicas_.primary_epoch()) + ", got record " +
                               std::to_string(rec.seq()) + " of epoch " +
                               std::to_string(rec.primary_epoch()) + ": send a snapshot"),
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
    consistency_ = std::make_unique<Consistency>(ConsistencyOptions(), ConsistencyStateFromWire(rec.state()));
    initialized_ = true;
    replicas_.Applied(rec.seq(), rec.primary_epoch());
    ack.header.set_version(consistency_->version());
  }
  ack.responder = std::move(r);
  Send(ack);
}

}  // namespace tessera
