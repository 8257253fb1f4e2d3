// PserverNode::OneIndex (see pserver_node_parts.h): a pserver serving one index of the slot map.
#include <spdlog/spdlog.h>

#include "common/logging.h"
#include "coord/keys.h"
#include "pserver/pserver_node_metrics.h"
#include "pserver/pserver_node_parts.h"
#include "transport/stream_io.h"

namespace tessera {

StatusOr<std::optional<Claim>> PserverNode::Startup::ClaimWhenFree(Registry& registry, int count,
                                                                   const std::string& waiting) {
  auto waiting_since = Now();
  // Bounded by Stop(): a pserver waits as long as its index is taken, checking 4 times a second.
  while (!node_->stop_requested()) {
    auto c = registry.ClaimIndex(count, info_.dump(), keeper_->id(), options().index);
    if (c.ok()) return std::optional<Claim>(*c);
    if (c.status().code() != StatusCode::kResourceExhausted) return c.status();
    if (Now() - waiting_since > std::chrono::seconds(10)) {
      spdlog::info("{}", waiting);
      waiting_since = Now();
    }
    node_->WaitForStop(std::chrono::milliseconds(250));
  }
  return std::optional<Claim>();
}

PserverNode::OneIndex::OneIndex(Startup* up)
    : up_(up), node_(up->node()), registry_(up->etcd(), keys::PserverPrefix(up->job())) {}

PserverNode::OneIndex::~OneIndex() {
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  up_->ShowService(nullptr);
}

Status PserverNode::OneIndex::Run() {
  const PserverOptions& o = up_->options();
  const std::string waiting = o.index >= 0 ? "pserver index " + std::to_string(o.index) + " of job " +
                                                 up_->job() + " is taken; waiting for it to free up"
                                           : "all " + std::to_string(up_->config().pservers) +
                                                 " pserver indices of job " + up_->job() +
                                                 " are taken; waiting for one to free up";
  TESSERA_ASSIGN_OR_RETURN(auto claim, up_->ClaimWhenFree(registry_, up_->config().pservers, waiting));
  if (!claim) return Status::OK();  // stopped while waiting
  claim_ = *claim;
  node_->index_ = claim_.index;
  node_->epoch_ = claim_.epoch;
  SetLogNode("pserver-" + std::to_string(claim_.index));
  spdlog::info("pserver {} serving at {} (epoch {}, {} of {} slots, mode {}; data plane: {})", claim_.index,
               up_->address(), claim_.epoch, up_->slots().SlotsOf(claim_.index).size(), up_->slots().slots(),
               up_->config().mode.ToString(), up_->EndpointsText());
  TESSERA_RETURN_IF_ERROR(StartService());
  Watch();
  Status result = Serve();
  Drain(result);
  return result;
}

PserverServiceOptions PserverNode::OneIndex::ServiceOptions() const {
  const PserverOptions& o = up_->options();
  PserverServiceOptions so;
  so.index = claim_.index;
  so.epoch = claim_.epoch;
  so.job = up_->config();
  so.slots = up_->slots();
  so.lease_alive = [k = up_->keeper()] { return k->state() == LeaseState::kAlive; };
  so.job_name = up_->job();
  so.metrics = up_->prom();
  so.delta_policy.max_fraction = o.checkpoint_delta_fraction;
  so.apply_threads = o.apply_threads;
  if (consistent_) {
    so.snapshot_every = up_->config().checkpoint_steps;
    so.snapshot_due = [node = node_] { node->WakeCheckpointThreads(); };
  }
  so.on_initialized = [etcd = up_->etcd(), job = up_->job(), claim = claim_,
                       lease = up_->keeper()->id()](int64_t version) -> Status {
    nlohmann::json v = {{"epoch", claim.epoch}, {"version", version}};
    return etcd->Put(keys::PserverReady(job, claim.index), v.dump(), lease).status();
  };
  return so;
}

Status PserverNode::OneIndex::StartService() {
  const PserverOptions& o = up_->options();
  const int64_t steps = up_->config().checkpoint_steps;
  consistent_ = !o.checkpoint_dir.empty() && steps > 0;
  if (consistent_) {
    spdlog::info(
        "pserver {}: consistent checkpoints at every version that is a multiple of {} (the job's checkpoint "
        "steps){}",
        claim_.index, steps,
        o.checkpoint_seconds > 0 || o.checkpoint_steps > 0
            ? "; --checkpoint-every/--checkpoint-steps do not apply"
            : "");
  }
  service_ = std::make_unique<PserverService>(ServiceOptions());
  up_->ShowService(service_.get());
  if (!o.checkpoint_dir.empty()) {
    checkpointer_ =
        std::make_unique<Checkpointer>(up_->etcd(), up_->job(), claim_.index, claim_.epoch, o.checkpoint_dir);
    TESSERA_ASSIGN_OR_RETURN(auto latest, checkpointer_->LoadLatest());
    if (!latest) {
      spdlog::info("pserver {}: no usable checkpoint in {}; a trainer initializes the shard", claim_.index,
                   o.checkpoint_dir);
    } else if (Status s = service_->RestoreCheckpoint(*latest); !s.ok()) {
      spdlog::error(
          "pserver {}: the checkpoint of version {} does not fit this job ({}); a trainer initializes the "
          "shard instead",
          claim_.index, latest->version, s.ToString());
    } else {
      checkpointer_->Continue(service_->CheckpointGen());
      spdlog::info(
          "pserver {}: loaded the checkpoint of version {} from {} ({} dense blocks, {} sparse tables)",
          claim_.index, latest->version, o.checkpoint_dir, latest->shard.dense.size(),
          latest->shard.sparse.size());
    }
  }
  up_->Install(service_.get());
  if (checkpointer_) {
    checkpoint_thread_ = std::thread([this, node = node_, consistent = consistent_] {
      node->CheckpointLoop(service_.get(), checkpointer_.get(), consistent);
    });
  }
  return Status::OK();
}

void PserverNode::OneIndex::Watch() {
  // Trainers whose registration disappears leave the consistency group.
  trainer_watch_ =
      Registry(up_->etcd(), keys::TrainerPrefix(up_->job())).WatchChanges([this](const MemberChanges& c) {
        std::lock_guard<std::mutex> lock(trainers_mu_);
        for (const auto& left : trainers_.Apply(c)) service_->TrainerLeft(left.name, left.epoch);
      });
  // Our own key going away (revoked, expired, deleted) means we must stop at once.
  self_watch_ = registry_.Watch([this](const MemberList& list) {
    const Member* me = list.Find(std::to_string(claim_.index));
    if (me && me->epoch == claim_.epoch) return;
    service_->StopServing(Status::Unavailable("its registration " + claim_.key + " is gone"));
    node_->MarkLost(Status::Aborted("registration " + claim_.key + " (epoch " + std::to_string(claim_.epoch) +
                                    ") is gone"));
  });
}

Status PserverNode::OneIndex::Serve() {
  std::unique_lock<std::mutex> lock(node_->mu_);
  node_->cv_.wait(lock, [&] { return node_->stop_ || node_->lost_; });
  return node_->lost_ ? node_->lost_reason_ : Status::OK();
}

void PserverNode::OneIndex::Drain(const Status& result) {
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  if (!result.ok()) spdlog::error("pserver {} stops serving: {}", claim_.index, result.message());
  service_->StopServing(result.ok() ? Status::Unavailable("shutting down") : result);
  self_watch_->Cancel();
  trainer_watch_->Cancel();
  up_->StopTransports();
  up_->Install(nullptr);
  if (result.ok()) {
    // A clean exit frees the index at once for a successor.
    Status s = up_->keeper()->Revoke();
    if (!s.ok()) spdlog::warn("could not revoke the lease: {}", s.ToString());
    const std::string polling = SpinSummary(SpinCountersNow());
    spdlog::info("pserver {} stopped; {}{}{}", claim_.index, MemorySummary(service_->counters()),
                 polling.empty() ? "" : "; ", polling);
  } else {
    up_->keeper()->Stop();
  }
  up_->ShowService(nullptr);
  service_.reset();
}

}  // namespace tessera
