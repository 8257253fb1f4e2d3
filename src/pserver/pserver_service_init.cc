// PserverService (see pserver_service.h): how a shard gets its state. INIT and INIT_DONE from
// the trainer that initializes (or refills) it, and snapshots for and restores from checkpoints.
// The request path (pushes, pulls, barriers) is in pserver_service.cc.
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/finite.h"
#include "common/strings.h"
#include "job/wire_convert.h"
#include "pserver/pserver_service.h"
#include "pserver/segment_list.h"

namespace tessera {
namespace {

// A declaration as INIT carries it; InvalidArgument naming the parameter if a part is bad.
StatusOr<ParamDecl> DeclOf(const wire::ParamSpec& spec) {
  ParamDecl d;
  d.name = spec.name();
  d.sparse = spec.sparse();
  d.size = spec.size();
  d.dim = spec.dim();
  const std::string what = (d.sparse ? "table '" : "parameter '") + spec.name() + "'";
  auto opt = FromWire(spec.optimizer());
  if (!opt.ok()) return opt.status().WithContext(what);
  d.optimizer = *opt;
  if (!d.sparse) return d;
  auto init = FromWire(spec.init());
  if (!init.ok()) return init.status().WithContext(what);
  d.init = *init;
  auto limits = FromWire(spec.limits());
  if (!limits.ok()) return limits.status().WithContext(what);
  d.limits = *limits;
  return d;
}

}  // namespace

void PserverService::HandleInit(const wire::DataRequest& req, ConstBuffer payload,
                                std::unique_ptr<Responder> r) {
  Reply rep;
  {
    MutexLock lock(&mu_);
    for (const auto& spec : req.params()) {
      auto d = DeclOf(spec);
      Status s = d.ok() ? store_.Declare(*d) : d.status();
      if (!s.ok()) {
        lock.Unlock();
        return SendError(*r, s, wire::DataReply::BAD_REQUEST);
      }
    }
    auto values = SegmentList::Read(store_, req.push(), SegmentList::Use::kInit);
    Status s = values.status();
    if (s.ok()) s = values->CheckPayload(payload.size);
    if (s.ok() && payload.size % sizeof(float) == 0) {
      int64_t bad = FirstNonFinite(static_cast<const float*>(payload.data), payload.size / sizeof(float));
      if (bad >= 0) {
        s = Status::InvalidArgument("initial value of " + values->Describe(static_cast<size_t>(bad)) +
                                    " is not finite (NaN or infinity)");
      }
    }
    if (!s.ok()) {
      lock.Unlock();
      return SendError(*r, s.WithContext("INIT"), wire::DataReply::BAD_REQUEST);
    }
    // A restored shard takes a trainer's values only if they are newer than the checkpoint.
    bool take = !initialized_ && (restored_version_ < 0 || req.step() > restored_version_);
    if (take) {
      const float* p = static_cast<const float*>(payload.data);
      for (const auto& part : values->parts()) {
        const wire::Segment& seg = values->segment(part);
        store_.SetDense(seg.param(), seg.block(), p + part.offset);
      }
      if (restored_version_ >= 0 && !refill_logged_) {
        refill_logged_ = true;
        spdlog::info(
            "pserver {}: dense values refilled by trainer {} at step {}; optimizer state and sparse rows "
            "from the checkpoint of version {}",
            options_.index, req.trainer(), req.step(), restored_version_);
      }
      if (consistency_->version() != req.step() && consistency_->members().empty()) {
        consistency_ = std::make_unique<Consistency>(ConsistencyOptions(), req.step());
      }
    }
    rep.header.set_initialized(initialized_);
    rep.header.set_version(consistency_->version());
  }
  rep.responder = std::move(r);
  Send(rep);
}

void PserverService::HandleInitDone(const wire::DataRequest& req, std::unique_ptr<Responder> r) {
  int64_t version;
  int64_t bytes;
  bool first;
  {
    MutexLock lock(&mu_);
    first = !initialized_;
    initialized_ = true;
    // The first consistent checkpoint: the initial values (a shard restored from a checkpoint
    // of this version has one already).
    if (first && options_.snapshot_every > 0 && restored_version_ != consistency_->version()) {
      AddDueSnapshot(CheckpointLocked());
    }
    restored_version_ = -1;
    version = consistency_->version();
    bytes = store_.TotalBytes();
  }
  if (first) {
    spdlog::info("pserver {} initialized by trainer {} at version {} ({} held here)", options_.index,
                 req.trainer(), version, HumanBytes(static_cast<double>(bytes)));
  }
  Status s = options_.on_initialized ? options_.on_initialized(version) : Status::OK();
  if (!s.ok()) return SendError(*r, s.WithContext("recording readiness in etcd"), wire::DataReply::NONE);
  Reply rep;
  rep.header.set_initialized(true);
  rep.header.set_version(version);
  rep.responder = std::move(r);
  Send(rep);
}

Checkpoint PserverService::HeaderLocked() const {
  Checkpoint c;
  c.job = options_.job_name;
  c.index = options_.index;
  c.created_ms = WallMillis();
  c.version = consistency_->version();
  return c;
}

Checkpoint PserverService::SnapshotLocked() const {
  Checkpoint c = HeaderLocked();
  c.shard = store_.Snapshot();
  return c;
}

Checkpoint PserverService::CheckpointLocked() {
  Checkpoint c = HeaderLocked();
  const bool delta =
      ChooseCheckpointKind(chain_, store_.checkpoint_gen(), store_.DeltaBytes(), options_.delta_policy).delta;
  c.shard = store_.CheckpointSnapshot(delta);
  c.gen = store_.checkpoint_gen();
  return c;
}

StatusOr<Checkpoint> PserverService::SnapshotForCheckpoint(const std::string& job) {
  MutexLock lock(&mu_);
  if (!initialized_) return Status::FailedPrecondition("not initialized yet");
  if (mixed()) {
    // Some blocks are already a step ahead (pushes in pieces): the copy is taken at the barrier.
    snapshot_wanted_ = true;
    return Status::Unavailable("a step is half applied; the copy is taken at its barrier");
  }
  Checkpoint c = CheckpointLocked();
  c.job = job;
  return c;
}

void PserverService::SetCheckpointChain(const CheckpointChainState& chain) {
  MutexLock lock(&mu_);
  chain_ = chain;
}

int64_t PserverService::CheckpointGen() {
  MutexLock lock(&mu_);
  return store_.checkpoint_gen();
}

std::optional<Checkpoint> PserverService::TakeDueSnapshot() { return due_.Take(); }

Status PserverService::RestoreCheckpoint(const Checkpoint& c) {
  MutexLock lock(&mu_);
  if (initialized_) return Status::FailedPrecondition("the shard is already initialized");
  TESSERA_RETURN_IF_ERROR(store_.Restore(c.shard));
  consistency_ = std::make_unique<Consistency>(ConsistencyOptions(), c.version, /*mid_job=*/true);
  restored_version_ = c.version;
  return Status::OK();
}

int64_t PserverService::CheckpointableVersion() {
  MutexLock lock(&mu_);
  return initialized_ ? consistency_->version() : -1;
}

}  // namespace tessera
