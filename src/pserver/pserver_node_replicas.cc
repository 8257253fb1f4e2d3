// PserverNode::ReplicatedHost (see pserver_node_parts.h): a pserver process of a job with
// replicas > 1 or elastic pservers.
//
// The process claims a host index (keys::PserverHostPrefix) and serves the shards the replica
// map (keys::ReplicaMap, job/replica_map.h) gives it. A control loop, every 50 ms, brings the
// process in line with the map and the live hosts:
//  - a holder whose host registration is gone is failed over (ReplicaMap::FailOver: each of its
//    primary shards goes to its first backup), in one etcd transaction fenced on the map's
//    revision, by whichever live host sees it first;
//  - for each shard it is primary of, the process claims the shard's registration
//    (keys::Pserver, what trainers look up) with its lease, promoting its backup copy, or
//    starting the shard afresh (from its checkpoint, else a trainer initializes it);
//  - a primary keeps one replication stream per live backup (replica_streams.h) and, where the
//    map has fewer copies than the job's replicas, starts streams to the hosts
//    ReplicaMap::RestorePlan picks; once such a host holds the shard it is added to the map.
//  - elastic jobs (and any host that is leaving): ReplicaMap::BalancePlan spreads the primaries
//    evenly over the hosts that stay. A primary that is to move streams its shard to the new
//    host; once that host holds it, the primary stops serving it, waits until the new host has
//    every record, hands it over in one fenced map change (ReplicaMap::Handover) and drops its
//    registration; the new host registers and promotes its copy. Trainers re-send what was not
//    counted, as after a failover.
//  - Stop() (SIGTERM) on a host of an elastic job with other hosts drains it first: it marks its
//    registration "leaving", hands every primary over, then exits (at most 60 s).
// A host that starts (or restarts) has lost whatever it held: it first takes itself out of the
// map. The decisions are ReplicaMap's; this file is the I/O around them.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/logging.h"
#include "coord/keys.h"
#include "pserver/pserver_node_parts.h"
#include "transport/endpoint_choice.h"

namespace tessera {
namespace {

std::string Holders(const std::vector<int>& h) {
  std::string out;
  for (int x : h) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// The registration of host `h`, or an empty one (epoch 0) when it is not alive.
const Member& Alive(const std::map<int, Member>& alive, int h) {
  static const Member kNone;
  auto it = alive.find(h);
  return it == alive.end() ? kNone : it->second;
}

}  // namespace

PserverNode::ReplicatedHost::ReplicatedHost(Startup* up)
    : up_(up),
      node_(up->node()),
      job_(up->job()),
      config_(up->config()),
      shards_(up->config().pservers),
      lease_(up->keeper()->id()),
      hosts_(up->etcd(), keys::PserverHostPrefix(up->job())),
      shard_registry_(up->etcd(), keys::PserverPrefix(up->job())),
      router_(shards_,
              [this](int shard) {
                spdlog::info("pserver host {}: receiving a copy of shard {}", me_, shard);
                return std::make_shared<PserverService>(ServiceOptions(shard, /*backup=*/true, 0));
              }),
      started_(Now()) {}

PserverNode::ReplicatedHost::~ReplicatedHost() {
  if (host_watch_) host_watch_->Cancel();
  if (trainer_watch_) trainer_watch_->Cancel();
  for (auto& t : checkpoint_threads_)
    if (t.joinable()) t.join();
}

Status PserverNode::ReplicatedHost::Run() {
  TESSERA_ASSIGN_OR_RETURN(auto claim, up_->ClaimWhenFree(hosts_, shards_,
                                                          "every pserver host index of job " + job_ +
                                                              " is taken; waiting for one to free up"));
  if (!claim) return Status::OK();  // stopped while waiting
  host_ = *claim;
  me_ = host_.index;
  node_->index_ = me_;
  node_->epoch_ = host_.epoch;
  SetLogNode("pserver-" + std::to_string(me_));
  spdlog::info("pserver host {} of job {} (epoch {}): {} shards, {} copies each, mode {}", me_, job_,
               host_.epoch, shards_, config_.replicas, config_.mode.ToString());
  up_->Install(&router_);
  Watch();
  // A turn every 50 ms, until the run is lost or a turn ends it (stopping; at most 60 s of
  // handing over after Stop()).
  Status result;
  while (true) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(node_->mu_);
      node_->cv_.wait_for(lock, std::chrono::milliseconds(50),
                          [&] { return (node_->stop_ && !draining_) || node_->lost_; });
      if (node_->lost_) {
        result = node_->lost_reason_;
        break;
      }
      stopping = node_->stop_;
    }
    if (Tick(stopping) == Turn::kEnd) break;
  }
  Drain(result);
  return result;
}

PserverServiceOptions PserverNode::ReplicatedHost::ServiceOptions(int shard, bool backup,
                                                                  int64_t epoch) const {
  const PserverOptions& o = up_->options();
  PserverServiceOptions so;
  so.index = shard;
  so.epoch = epoch;
  so.job = config_;
  so.slots = up_->slots();
  so.backup = backup;
  so.lease_alive = [k = up_->keeper()] { return k->state() == LeaseState::kAlive; };
  so.job_name = job_;
  so.metrics = up_->prom();
  so.delta_policy.max_fraction = o.checkpoint_delta_fraction;
  so.apply_threads = o.apply_threads;
  if (!o.checkpoint_dir.empty() && config_.checkpoint_steps > 0) {
    so.snapshot_every = config_.checkpoint_steps;
    so.snapshot_due = [node = node_] { node->WakeCheckpointThreads(); };
  }
  so.on_initialized = [etcd = up_->etcd(), job = job_, shard, epoch,
                       lease = lease_](int64_t version) -> Status {
    nlohmann::json v = {{"epoch", epoch}, {"version", version}};
    return etcd->Put(keys::PserverReady(job, shard), v.dump(), lease).status();
  };
  return so;
}

// Live hosts and trainers, from watches. This host's own registration gone ends the run.
void PserverNode::ReplicatedHost::Watch() {
  host_watch_ = hosts_.Watch([this](const MemberList& list) {
    std::map<int, Member> now;
    for (const auto& m : list.members) now[std::atoi(m.name.c_str())] = m;
    bool self = false;
    for (const auto& m : list.members) self |= m.name == std::to_string(me_) && m.epoch == host_.epoch;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      live_ = std::move(now);
    }
    if (!self) {
      for (auto& s : router_.All())
        if (s) s->StopServing(Status::Unavailable("its registration " + host_.key + " is gone"));
      node_->MarkLost(Status::Aborted("registration " + host_.key + " is gone"));
    }
  });
  trainer_watch_ =
      Registry(up_->etcd(), keys::TrainerPrefix(job_)).WatchChanges([this](const MemberChanges& c) {
        for (const auto& left : trainers_.Apply(c)) {
          for (auto& s : router_.All())
            if (s && !s->backup()) s->TrainerLeft(left.name, left.epoch);
        }
      });
}

StatusOr<PserverNode::ReplicatedHost::MapAt> PserverNode::ReplicatedHost::ReadMap(
    const etcd::CallOptions& call) {
  etcd::EtcdClient* etcd = up_->etcd();
  TESSERA_ASSIGN_OR_RETURN(auto r, etcd->Get(keys::ReplicaMap(job_), {}, call));
  if (!r.kvs.empty()) {
    TESSERA_ASSIGN_OR_RETURN(ReplicaMap m, ReplicaMap::FromJson(r.kvs[0].value));
    return MapAt{std::move(m), r.kvs[0].mod_revision};
  }
  // The first host of the job writes the starting map: each shard on its own host, alone.
  TESSERA_ASSIGN_OR_RETURN(ReplicaMap m,
                           ReplicaMap::PrimariesOnly(config_.pservers, config_.pservers, config_.replicas,
                                                     config_.initial_pservers));
  etcd::Txn txn;
  txn.compares.push_back(etcd::Compare::Absent(keys::ReplicaMap(job_)));
  txn.success.push_back(etcd::Op::Put(keys::ReplicaMap(job_), m.ToJson()));
  TESSERA_RETURN_IF_ERROR(etcd->Commit(txn).status());
  return ReadMap(call);
}

StatusOr<bool> PserverNode::ReplicatedHost::SwapMap(const MapAt& at, const ReplicaMap& next) {
  etcd::Txn txn;
  txn.compares.push_back(
      etcd::Compare::ModRevision(keys::ReplicaMap(job_), etcd::Compare::Result::kEqual, at.revision));
  txn.success.push_back(etcd::Op::Put(keys::ReplicaMap(job_), next.ToJson()));
  TESSERA_ASSIGN_OR_RETURN(auto r, up_->etcd()->Commit(txn));
  return r.succeeded;
}

void PserverNode::ReplicatedHost::WarnOnce(const std::string& what) {
  if (said_.insert(what).second) spdlog::warn("{}", what);
}

PserverNode::ReplicatedHost::Turn PserverNode::ReplicatedHost::Tick(bool stopping) {
  etcd::CallOptions call;  // once stopping, an unreachable etcd is not waited for long
  if (stopping && !draining_) call.retry_timeout = std::chrono::seconds(1);
  auto at = ReadMap(call);
  if (!at.ok()) {
    if (stopping) return Turn::kEnd;  // etcd is unreachable: nothing can be handed over, stop as asked
    WarnOnce("pserver host " + std::to_string(me_) +
             ": cannot read the replica map: " + at.status().ToString());
    return Turn::kAgain;
  }
  std::map<int, Member> alive;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    alive = live_;
  }
  if (FailOverGone(*at, alive)) return Turn::kAgain;  // read the new map
  forgot_self_ = true;
  const ReplicaMap& map = at->map;

  std::vector<int> live_hosts, leaving, staying;
  for (const auto& [h, m] : alive) {
    live_hosts.push_back(h);
    auto v = nlohmann::json::parse(m.value, nullptr, false);
    const bool leaves = (v.is_object() && v.value("leaving", false)) || (h == me_ && draining_);
    (leaves ? leaving : staying).push_back(h);
  }
  if (stopping) {
    const Turn t = DecideStop(map, staying);
    if (t != Turn::kGoOn) return t;
  }
  const auto plan = map.RestorePlan(staying);
  const auto moves = config_.initial_pservers > 0 || !leaving.empty() ? map.BalancePlan(live_hosts, leaving)
                                                                      : std::vector<ReplicaMap::Move>{};
  for (int s = 0; s < shards_; ++s)
    if (ServePrimary(s, *at, alive, plan, moves)) break;  // the map changed: read it again
  return Turn::kAgain;
}

// A host that (re)starts holds nothing: out of the map first. Another host is gone once its
// registration is: one this process saw, or any after a lease's time (at the start of a job the
// others may not have registered yet).
bool PserverNode::ReplicatedHost::FailOverGone(const MapAt& at, const std::map<int, Member>& alive) {
  for (const auto& [h, v] : alive) seen_.insert(h);
  const bool settled = Now() - started_ > std::chrono::seconds(up_->options().lease_ttl_seconds);
  std::vector<int> gone;
  if (!forgot_self_) gone.push_back(me_);
  for (int s = 0; s < shards_; ++s)
    for (int h : at.map.HoldersOf(s))
      if (h != me_ && !alive.count(h) && (seen_.count(h) || settled) &&
          std::find(gone.begin(), gone.end(), h) == gone.end())
        gone.push_back(h);
  for (int dead : gone) {
    bool holds = false;
    for (int s = 0; s < shards_; ++s) holds |= at.map.Holds(s, dead);
    if (!holds) continue;
    auto next = at.map.FailOver(dead);
    if (!next.ok()) {
      if (dead == me_) continue;  // it held the only copy: it serves it again, as it can
      WarnOnce("pserver host " + std::to_string(me_) + ": host " + std::to_string(dead) +
               " is gone with the only copy of some shards: " + next.status().message());
      continue;
    }
    auto swapped = SwapMap(at, *next);
    if (swapped.ok() && *swapped) {
      spdlog::warn("pserver host {}: host {} is gone; its shards fail over (replica map epoch {})", me_, dead,
                   next->epoch());
      return true;
    }
  }
  return false;
}

PserverNode::ReplicatedHost::Turn PserverNode::ReplicatedHost::DecideStop(const ReplicaMap& map,
                                                                          const std::vector<int>& staying) {
  const bool others = std::any_of(staying.begin(), staying.end(), [&](int h) { return h != me_; });
  const size_t primaries = map.PrimarySlotsOf(me_).size();
  if (!draining_ && config_.initial_pservers > 0 && others && primaries > 0) {
    // Hand the primaries over before going (an elastic job shrinking).
    nlohmann::json v = up_->info();
    v["leaving"] = true;
    if (Status u = hosts_.Update(std::to_string(me_), v.dump(), host_.epoch, lease_); u.ok()) {
      draining_ = true;
      drain_deadline_ = Now() + std::chrono::seconds(60);
      spdlog::info("pserver host {} is leaving: handing {} shards over first", me_, primaries);
      return Turn::kAgain;
    }
  }
  if (draining_ && primaries > 0 && others && Now() <= drain_deadline_) return Turn::kGoOn;
  if (draining_ && primaries > 0) {
    if (others) {
      spdlog::warn("pserver host {}: leaving with {} shards not handed over", me_, primaries);
    } else {  // every host goes: the job is ending
      spdlog::info("pserver host {}: every host is leaving; stopping with its {} shards", me_, primaries);
    }
  }
  return Turn::kEnd;
}

bool PserverNode::ReplicatedHost::ServePrimary(int s, const MapAt& at, const std::map<int, Member>& alive,
                                               const std::vector<ReplicaMap::Copy>& plan,
                                               const std::vector<ReplicaMap::Move>& moves) {
  if (at.map.PrimaryOf(s) != me_) {
    if (claims_.count(s))
      WarnOnce("pserver host " + std::to_string(me_) + " is no longer shard " + std::to_string(s) +
               "'s primary");
    return false;
  }
  auto service = router_.Get(s);
  if (!claims_.count(s)) {
    service = BecomePrimary(s, std::move(service));
    if (!service) return false;  // its former primary's registration is still there: next time
  }
  ShardOutbox& box = *outboxes_[s];
  KeepStreams(s, box, at.map, alive, plan, moves);
  if (RecordNewCopy(s, box, at, plan)) return true;
  return HandOver(s, *service, box, at, moves);
}

// Registers shard `s` (Register, not ClaimIndex: one lease holds several shards' registrations
// here) and serves it: its backup copy promoted, else afresh (from its checkpoint, else a trainer
// initializes it). Null if the registration is still held.
std::shared_ptr<PserverService> PserverNode::ReplicatedHost::BecomePrimary(
    int s, std::shared_ptr<PserverService> service) {
  etcd::EtcdClient* etcd = up_->etcd();
  const PserverOptions& o = up_->options();
  auto epoch = shard_registry_.Register(std::to_string(s), up_->info().dump(), lease_);
  if (!epoch.ok()) return nullptr;
  Claim& c = claims_[s] = Claim{s, *epoch, keys::Pserver(job_, s)};
  if (service && service->backup()) {
    if (Status p = service->Promote(c.epoch); !p.ok()) {
      spdlog::warn("pserver host {}: {}", me_, p.ToString());
      service.reset();
    } else {
      nlohmann::json v = {{"epoch", c.epoch}, {"version", service->counters().version}};
      (void)etcd->Put(keys::PserverReady(job_, s), v.dump(), lease_);
    }
  }
  std::unique_ptr<Checkpointer> ck;
  if (!o.checkpoint_dir.empty())
    ck = std::make_unique<Checkpointer>(etcd, job_, s, c.epoch, o.checkpoint_dir);
  if (!service) {
    service = std::make_shared<PserverService>(ServiceOptions(s, /*backup=*/false, c.epoch));
    if (ck) {
      auto latest = ck->LoadLatest();
      if (latest.ok() && *latest && service->RestoreCheckpoint(**latest).ok()) {
        ck->Continue(service->CheckpointGen());  // later deltas build on it
        spdlog::info("pserver host {}: shard {} from the checkpoint of version {}", me_, s,
                     (*latest)->version);
      }
    }
    router_.Set(s, service);
  }
  spdlog::info("pserver host {} serves shard {} as its primary (epoch {}, version {})", me_, s, c.epoch,
               service->counters().version);
  auto box = std::make_unique<ShardOutbox>(service.get(), up_->transport());
  service->SetOutbox(box.get());
  outboxes_[s] = std::move(box);
  if (ck) {  // a promoted backup's first checkpoint is whole: its checkpointer has no chain
    const bool consistent = config_.checkpoint_steps > 0;
    checkpoint_threads_.emplace_back([node = node_, svc = service.get(), ckp = ck.get(), consistent] {
      node->CheckpointLoop(svc, ckp, consistent);
    });
    checkpointers_[s] = std::move(ck);
  }
  return service;
}

// Streams: to every live backup, and to the hosts the restore plan gives new copies and the moves
// new primaries.
void PserverNode::ReplicatedHost::KeepStreams(int s, ShardOutbox& box, const ReplicaMap& map,
                                              const std::map<int, Member>& alive,
                                              const std::vector<ReplicaMap::Copy>& plan,
                                              const std::vector<ReplicaMap::Move>& moves) {
  std::set<int> want;
  for (size_t k = 1; k < map.HoldersOf(s).size(); ++k)
    if (alive.count(map.HoldersOf(s)[k])) want.insert(map.HoldersOf(s)[k]);
  for (const auto& c : plan)
    if (c.slot == s && c.from == me_) want.insert(c.to);
  for (const auto& mv : moves)
    if (mv.slot == s && mv.from == me_ && alive.count(mv.to)) want.insert(mv.to);
  for (int h : box.hosts())
    if (!want.count(h) || box.EpochOf(h) != Alive(alive, h).epoch) box.RemoveStream(h);
  for (int h : want) {
    if (box.HasStream(h)) continue;
    const Member& m = Alive(alive, h);
    auto eps = ParsePserverEndpoints(m.value);
    if (!eps.ok()) continue;
    auto choice = ChooseEndpoint(*eps, TransportKind::kAuto, HostIdentity());
    if (!choice.ok()) continue;
    Status a = box.AddStream(h, m.epoch, choice->kind, choice->endpoint);
    if (a.ok()) spdlog::info("pserver host {}: shard {} replicates to host {}", me_, s, h);
  }
}

// A host the restore plan chose that now holds shard `s` becomes one of its holders in the map.
bool PserverNode::ReplicatedHost::RecordNewCopy(int s, ShardOutbox& box, const MapAt& at,
                                                const std::vector<ReplicaMap::Copy>& plan) {
  for (const auto& c : plan) {
    if (c.slot != s || c.from != me_ || !box.Synced(c.to)) continue;
    auto next = at.map.WithCopies({c});
    if (!next.ok()) continue;
    auto swapped = SwapMap(at, *next);
    if (swapped.ok() && *swapped) {
      spdlog::info("pserver host {}: host {} holds a copy of shard {} (holders {}; map epoch {})", me_, c.to,
                   s, Holders(next->HoldersOf(s)), next->epoch());
    }
    return true;  // read it again
  }
  return false;
}

// A move whose new host holds shard `s`: stop serving it, wait until the new host has every
// record (at most 10 s), hand it over in one fenced map change and drop its registration. true if
// the map changed or the handover must be tried again (read it again).
bool PserverNode::ReplicatedHost::HandOver(int s, PserverService& service, ShardOutbox& box, const MapAt& at,
                                           const std::vector<ReplicaMap::Move>& moves) {
  for (const auto& mv : moves) {
    if (mv.slot != s || mv.from != me_ || !box.Synced(mv.to)) continue;
    service.StopServing(Status::Unavailable("shard " + std::to_string(s) + " moves to pserver host " +
                                            std::to_string(mv.to)));
    const int64_t last = service.published();
    bool flushed = false;
    for (auto until = Now() + std::chrono::seconds(10); !flushed && Now() < until;) {
      flushed = box.Acked(mv.to) >= last;
      if (!flushed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    auto next = at.map.Handover(s, mv.to);
    auto swapped = flushed && next.ok() ? SwapMap(at, *next) : StatusOr<bool>(false);
    if (!swapped.ok() || !*swapped) {
      service.ResumeServing();  // another change came first, or the copy lagged: next time
      return true;
    }
    auto retired = router_.Get(s);
    (void)shard_registry_.Deregister(std::to_string(s), claims_[s].epoch);
    service.SetOutbox(nullptr);
    outboxes_.erase(s);
    claims_.erase(s);
    router_.Set(s, nullptr);
    retired_.push_back(retired);
    spdlog::info("pserver host {}: shard {} handed over to host {} at version {} (map epoch {})", me_, s,
                 mv.to, service.counters().version, next->epoch());
    return true;
  }
  return false;
}

void PserverNode::ReplicatedHost::Drain(const Status& result) {
  if (!result.ok()) spdlog::error("pserver host {} stops serving: {}", me_, result.message());
  for (auto& s : router_.All())
    if (s) s->StopServing(result.ok() ? Status::Unavailable("shutting down") : result);
  host_watch_->Cancel();
  trainer_watch_->Cancel();
  for (auto& [s, box] : outboxes_) {
    if (auto svc = router_.Get(s)) svc->SetOutbox(nullptr);
    box->Close();
  }
  for (auto& t : checkpoint_threads_) t.join();
  up_->Install(nullptr);
  if (result.ok()) {
    Status s = up_->keeper()->Revoke();
    if (!s.ok()) spdlog::warn("could not revoke the lease: {}", s.ToString());
    spdlog::info("pserver host {} stopped", me_);
  } else {
    up_->keeper()->Stop();
  }
}

}  // namespace tessera
