// TrainerMembership: see trainer_membership.h.
#include "client/trainer_membership.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>

#include "common/clock.h"
#include "common/net.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera {
TrainerMembership::TrainerMembership(etcd::EtcdClient* etcd, Options options, const ClientLimits& limits)
    : etcd_(etcd), options_(std::move(options)), limits_(limits) {}

TrainerMembership::~TrainerMembership() { Leave(); }

StatusOr<std::unique_ptr<TrainerMembership>> TrainerMembership::Join(etcd::EtcdClient* etcd, Options options,
                                                                     const ClientLimits& limits) {
  std::unique_ptr<TrainerMembership> m(new TrainerMembership(etcd, std::move(options), limits));
  // A join in a storm (hundreds of trainers claiming ids at once, on an overloaded etcd) can
  // outlast its lease: then it takes a new lease and registers again, a few times at most.
  constexpr int kLeases = 3;
  for (int lease = 1;; ++lease) {
    TESSERA_RETURN_IF_ERROR(m->StartLease());
    Status s = m->Register();
    if (s.ok()) break;
    if (lease == kLeases || !LeaseGoneBeforeRegistering(s, m->lost_.load())) return s;
    spdlog::warn("trainer of job {}: its lease was gone before it registered ({}); taking a new one",
                 m->options_.job, s.message());
  }
  m->registered_ = true;
  return m;
}

Status TrainerMembership::StartLease() {
  keeper_.reset();
  lost_ = false;
  TESSERA_ASSIGN_OR_RETURN(
      keeper_, LeaseKeeper::Start(etcd_, {options_.lease_ttl_seconds, {}}, [this](LeaseState st) {
        if (st != LeaseState::kLost || lost_.exchange(true) || !registered_) return;
        spdlog::error(
            "trainer {}'s lease was lost (etcd did not hear from it within {} s): the job "
            "now counts it as gone; restart the trainer to take part again",
            id_, options_.lease_ttl_seconds);
      }));
  return Status::OK();
}

Status TrainerMembership::Register() {
  info_ = {{"host", HostName()},
           {"pid", static_cast<int64_t>(::getpid())},
           {"started_ms", WallMillis()},
           {"transport_wanted", options_.transport}};
  if (!options_.trainer_id.empty()) return RegisterFixedId(info_.dump());
  Registry reg(etcd_, keys::TrainerPrefix(options_.job));
  TESSERA_ASSIGN_OR_RETURN(Claim claim, reg.ClaimLowestFree(info_.dump(), keeper_->id()));
  id_ = std::to_string(claim.index);
  epoch_ = claim.epoch;
  return Status::OK();
}

// A restarted trainer may find its predecessor's key still there until that lease expires: wait
// for it (a live trainer with the same id is refused at once).
Status TrainerMembership::RegisterFixedId(const std::string& info) {
  Registry reg(etcd_, keys::TrainerPrefix(options_.job));
  Deadline deadline(options_.wait_for_predecessor);
  bool said = false;
  while (true) {
    auto e = reg.Register(options_.trainer_id, info, keeper_->id());
    if (e.ok()) {
      id_ = options_.trainer_id;
      epoch_ = *e;
      return Status::OK();
    }
    Status refused =
        e.status().WithContext("trainer id '" + options_.trainer_id + "' of job '" + options_.job + "'");
    if (!MayBeAPredecessor(e.status().code())) return refused;
    auto kv = etcd_->Get(keys::Trainer(options_.job, options_.trainer_id));
    if (!kv.ok()) return kv.status();
    int64_t remaining = -1;
    if (!kv->kvs.empty()) {
      auto ttl = etcd_->LeaseTimeToLive(kv->kvs[0].lease);
      if (!ttl.ok()) return ttl.status();
      remaining = ttl->ttl_seconds;
    }
    switch (JudgePredecessor(!kv->kvs.empty(), remaining, deadline.expired(), options_.lease_ttl_seconds,
                             limits_)) {
      case PredecessorVerdict::kRefuse:
        return refused;
      case PredecessorVerdict::kWait:
        if (!said && remaining > 0) {
          spdlog::info("trainer id {} is still registered by a previous process; waiting {} s for its lease",
                       options_.trainer_id, remaining);
          said = true;
        }
        break;
      case PredecessorVerdict::kRetryNow:
        break;
    }
    std::this_thread::sleep_for(limits_.predecessor_poll);
  }
}

Status TrainerMembership::LostStatus() const {
  return Status::FailedPrecondition("trainer " + id_ + "'s lease was lost: the job counts it as gone");
}

void TrainerMembership::RecordTransports(const nlohmann::json& used) {
  if (used == info_["transport"]) return;
  info_["transport"] = used;
  Status s =
      Registry(etcd_, keys::TrainerPrefix(options_.job)).Update(id_, info_.dump(), epoch_, keeper_->id());
  if (!s.ok()) spdlog::warn("trainer {}: could not record its transports in etcd: {}", id_, s.ToString());
}

Status TrainerMembership::WaitForTrainers(int n, std::chrono::milliseconds timeout) const {
  auto watch = Registry(etcd_, keys::TrainerPrefix(options_.job)).Watch(nullptr);
  Deadline d(timeout);
  bool ok = false;
  while (!ok && !d.expired()) {
    if (lost()) return LostStatus();
    ok = watch->WaitFor([n](const MemberList& l) { return static_cast<int>(l.members.size()) >= n; },
                        std::min<std::chrono::milliseconds>(d.remaining(), std::chrono::milliseconds(500)));
  }
  MemberList seen = watch->Snapshot();
  watch->Cancel();
  if (ok) return Status::OK();
  std::vector<std::string> names;
  for (const auto& m : seen.members) names.push_back(m.name);
  return Status::DeadlineExceeded("fewer than " + std::to_string(n) + " trainers registered in time (saw " +
                                  std::to_string(seen.members.size()) + " [" + tessera::Join(names, ",") +
                                  "] at revision " + std::to_string(seen.revision) + ")");
}

void TrainerMembership::Leave() {
  if (left_ || !keeper_) return;
  left_ = true;
  // Deregistering is the goodbye: every pserver watches the trainers' keys and takes this
  // trainer out of its group at once (no request that could hang on a dead pserver).
  if (!id_.empty()) {
    nlohmann::json left = {{"pid", static_cast<int64_t>(::getpid())}, {"epoch", epoch_}};
    (void)Registry(etcd_, keys::TrainerPrefix(options_.job))
        .Deregister(id_, epoch_, {etcd::Op::Put(keys::TrainerLeft(options_.job, id_), left.dump())});
  }
  (void)keeper_->Revoke();
}

}  // namespace tessera
