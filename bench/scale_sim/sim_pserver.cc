// A pserver's coordination without its data plane (see sim_pserver.h).
#include "sim_pserver.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "common/strings.h"
#include "coord/keys.h"

namespace tessera::bench {

StatusOr<std::unique_ptr<SimPserver>> SimPserver::Start(const SimPserverOptions& o) {
  std::unique_ptr<SimPserver> p(new SimPserver());
  etcd::EtcdOptions eo;
  eo.endpoints = Split(o.etcd, ',');
  TESSERA_ASSIGN_OR_RETURN(p->etcd_, etcd::EtcdClient::Create(eo));
  TESSERA_ASSIGN_OR_RETURN(p->keeper_, LeaseKeeper::Start(p->etcd_.get(), {o.lease_ttl_seconds, {}}));
  // What a real pserver registers, with an address nothing listens on.
  const nlohmann::json info = {{"address", "127.0.0.1:9"},
                               {"host", "127.0.0.1"},
                               {"transport", "tcp"},
                               {"endpoints", {{"tcp", "127.0.0.1:9"}}},
                               {"started_ms", WallMillis()}};
  Registry registry(p->etcd_.get(), keys::PserverPrefix(o.job));
  Deadline deadline(o.claim_for);
  // Bounded by claim_for: a taken index is looked at again 4 times a second, as PserverNode does.
  while (true) {
    auto c = registry.ClaimIndex(o.pservers, info.dump(), p->keeper_->id(), o.index);
    if (c.ok()) {
      p->claim_ = *c;
      break;
    }
    if (c.status().code() != StatusCode::kResourceExhausted || deadline.expired()) return c.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  SimPserver* self = p.get();
  p->trainer_watch_ =
      Registry(p->etcd_.get(), keys::TrainerPrefix(o.job)).WatchChanges([self](const MemberChanges& c) {
        std::lock_guard<std::mutex> lock(self->mu_);
        (void)self->trainers_.Apply(c);
        self->trainer_lists_.fetch_add(1);
      });
  p->self_watch_ = registry.Watch([](const MemberList&) {});
  const nlohmann::json ready = {{"epoch", p->claim_.epoch}, {"version", 0}};
  TESSERA_RETURN_IF_ERROR(
      p->etcd_->Put(keys::PserverReady(o.job, p->claim_.index), ready.dump(), p->keeper_->id()).status());
  return p;
}

void SimPserver::Crash() {
  std::lock_guard<std::mutex> lock(mu_);
  if (crashed_) return;
  crashed_ = true;
  keeper_->Stop();
}

SimPserver::~SimPserver() {
  if (trainer_watch_) trainer_watch_->Cancel();
  if (self_watch_) self_watch_->Cancel();
  if (keeper_ && !crashed_) (void)keeper_->Revoke();
}

}  // namespace tessera::bench
