// PserverNode::RunReplicated (see pserver_node.h): a pserver process of a job with replicas > 1.
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
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/logging.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "job/replica_map.h"
#include "pserver/checkpointer.h"
#include "pserver/pserver_node_serving.h"
#include "pserver/replica_streams.h"
#include "pserver/shard_router.h"
#include "transport/endpoint_choice.h"

namespace tessera {
namespace {

struct MapAt {
  ReplicaMap map;
  int64_t revision = 0;  // the key's mod revision (0: absent)
};

StatusOr<MapAt> ReadMap(etcd::EtcdClient* etcd, const std::string& job, const JobConfig& config,
                        const etcd::CallOptions& call = {}) {
  TESSERA_ASSIGN_OR_RETURN(auto r, etcd->Get(keys::ReplicaMap(job), {}, call));
  if (!r.kvs.empty()) {
    TESSERA_ASSIGN_OR_RETURN(ReplicaMap m, ReplicaMap::FromJson(r.kvs[0].value));
    return MapAt{std::move(m), r.kvs[0].mod_revision};
  }
  // The first host of the job writes the starting map: each shard on its own host, alone.
  TESSERA_ASSIGN_OR_RETURN(ReplicaMap m, ReplicaMap::PrimariesOnly(config.pservers, config.pservers,
                                                                   config.replicas, config.initial_pservers));
  etcd::Txn txn;
  txn.compares.push_back(etcd::Compare::Absent(keys::ReplicaMap(job)));
  txn.success.push_back(etcd::Op::Put(keys::ReplicaMap(job), m.ToJson()));
  TESSERA_RETURN_IF_ERROR(etcd->Commit(txn).status());
  return ReadMap(etcd, job, config, call);
}

// Replaces the map at `at` with `next`; false if another host changed it first.
StatusOr<bool> SwapMap(etcd::EtcdClient* etcd, const std::string& job, const MapAt& at,
                       const ReplicaMap& next) {
  etcd::Txn txn;
  txn.compares.push_back(
      etcd::Compare::ModRevision(keys::ReplicaMap(job), etcd::Compare::Result::kEqual, at.revision));
  txn.success.push_back(etcd::Op::Put(keys::ReplicaMap(job), next.ToJson()));
  TESSERA_ASSIGN_OR_RETURN(auto r, etcd->Commit(txn));
  return r.succeeded;
}

std::string Holders(const std::vector<int>& h) {
  std::string out;
  for (int x : h) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

}  // namespace

Status PserverNode::RunReplicated(const Serving& sv) {
  etcd::EtcdClient* etcd = sv.etcd;
  const std::string& job = options_.job;
  const JobConfig& config = sv.config;
  const int shards = config.pservers;
  const int64_t lease = sv.keeper->id();
  const std::string info = sv.info.dump();

  // The host index: the lowest free one (or --index), waiting while all are taken.
  Registry hosts(etcd, keys::PserverHostPrefix(job));
  Claim host;
  auto waiting_since = Now();
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return Status::OK();
    }
    auto c = hosts.ClaimIndex(shards, info, lease, options_.index);
    if (c.ok()) {
      host = *c;
      break;
    }
    if (c.status().code() != StatusCode::kResourceExhausted) return c.status();
    if (Now() - waiting_since > std::chrono::seconds(10)) {
      spdlog::info("every pserver host index of job {} is taken; waiting for one to free up", job);
      waiting_since = Now();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stop_; });
  }
  const int me = host.index;
  index_ = me;
  epoch_ = host.epoch;
  SetLogNode("pserver-" + std::to_string(me));
  spdlog::info("pserver host {} of job {} (epoch {}): {} shards, {} copies each, mode {}", me, job,
               host.epoch, shards, config.replicas, config.mode.ToString());

  auto options_for = [&](int shard, bool backup, int64_t epoch) {
    PserverServiceOptions so;
    so.index = shard;
    so.epoch = epoch;
    so.job = config;
    so.slots = sv.slots;
    so.backup = backup;
    so.lease_alive = [k = sv.keeper] { return k->state() == LeaseState::kAlive; };
    so.job_name = job;
    so.metrics = sv.prom;
    so.delta_policy.max_fraction = options_.checkpoint_delta_fraction;
    so.apply_threads = options_.apply_threads;
    if (!options_.checkpoint_dir.empty() && config.checkpoint_steps > 0) {
      so.snapshot_every = config.checkpoint_steps;
      so.snapshot_due = [this] { WakeCheckpointThreads(); };
    }
    so.on_initialized = [etcd, job, shard, epoch, lease](int64_t version) -> Status {
      nlohmann::json v = {{"epoch", epoch}, {"version", version}};
      return etcd->Put(keys::PserverReady(job, shard), v.dump(), lease).status();
    };
    return so;
  };
  ShardRouter router(shards, [&](int shard) {
    spdlog::info("pserver host {}: receiving a copy of shard {}", me, shard);
    return std::make_shared<PserverService>(options_for(shard, /*backup=*/true, 0));
  });
  sv.install(&router);

  // Live hosts and trainers, from watches.
  std::mutex live_mu;
  std::map<int, Member> live;  // host index -> registration
  auto host_watch = hosts.Watch([&](const MemberList& list) {
    std::map<int, Member> now;
    for (const auto& m : list.members) now[std::atoi(m.name.c_str())] = m;
    bool self = false;
    for (const auto& m : list.members) self |= m.name == std::to_string(me) && m.epoch == host.epoch;
    {
      std::lock_guard<std::mutex> lock(live_mu);
      live = std::move(now);
    }
    if (!self) {
      for (auto& s : router.All())
        if (s) s->StopServing(Status::Unavailable("its registration " + host.key + " is gone"));
      std::lock_guard<std::mutex> lock(mu_);
      if (!lost_) {
        lost_ = true;
        lost_reason_ = Status::Aborted("registration " + host.key + " is gone");
      }
      cv_.notify_all();
    }
  });
  std::map<std::string, int64_t> trainers;
  auto trainer_watch = Registry(etcd, keys::TrainerPrefix(job)).Watch([&](const MemberList& list) {
    std::map<std::string, int64_t> now;
    for (const auto& m : list.members) now[m.name] = m.epoch;
    for (const auto& [name, epoch] : trainers) {
      auto it = now.find(name);
      if (it != now.end() && it->second == epoch) continue;
      for (auto& s : router.All())
        if (s && !s->backup()) s->TrainerLeft(name, epoch);
    }
    trainers = std::move(now);
  });

  Registry shard_registry(etcd, keys::PserverPrefix(job));
  std::map<int, Claim> claims;                           // shard registrations held
  std::map<int, std::unique_ptr<ShardOutbox>> outboxes;  // shards served as primary
  std::map<int, std::unique_ptr<Checkpointer>> checkpointers;
  std::vector<std::thread> checkpoint_threads;
  bool forgot_self = false;
  bool draining = false;  // Stop() came: handing the primaries over before exiting
  TimePoint drain_deadline;
  std::vector<std::shared_ptr<PserverService>> retired;  // handed over: kept for their checkpoint threads
  std::set<int> seen;                                    // hosts seen registered
  const TimePoint started = Now();
  std::set<std::string> said;  // warnings given once
  auto once = [&](const std::string& what) {
    if (said.insert(what).second) spdlog::warn("{}", what);
  };

  Status result;
  while (true) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return (stop_ && !draining) || lost_; });
      if (lost_) {
        result = lost_reason_;
        break;
      }
      stopping = stop_;
    }
    etcd::CallOptions call;  // once stopping, an unreachable etcd is not waited for long
    if (stopping && !draining) call.retry_timeout = std::chrono::seconds(1);
    auto at = ReadMap(etcd, job, config, call);
    if (!at.ok()) {
      if (stopping) break;  // etcd is unreachable: nothing can be handed over, stop as asked
      once("pserver host " + std::to_string(me) + ": cannot read the replica map: " + at.status().ToString());
      continue;
    }
    std::map<int, Member> alive;
    {
      std::lock_guard<std::mutex> lock(live_mu);
      alive = live;
    }
    // A host that (re)starts holds nothing: out of the map first. Another host is gone once
    // its registration is: one this process saw, or any after a lease's time (at the start of
    // a job the others may not have registered yet).
    for (const auto& [h, v] : alive) seen.insert(h);
    const bool settled = Now() - started > std::chrono::seconds(options_.lease_ttl_seconds);
    std::vector<int> gone;
    if (!forgot_self) gone.push_back(me);
    for (int s = 0; s < shards; ++s)
      for (int h : at->map.HoldersOf(s))
        if (h != me && !alive.count(h) && (seen.count(h) || settled) &&
            std::find(gone.begin(), gone.end(), h) == gone.end())
          gone.push_back(h);
    bool changed = false;
    for (int dead : gone) {
      bool holds = false;
      for (int s = 0; s < shards; ++s) holds |= at->map.Holds(s, dead);
      if (!holds) continue;
      auto next = at->map.FailOver(dead);
      if (!next.ok()) {
        if (dead == me) continue;  // it held the only copy: it serves it again, as it can
        once("pserver host " + std::to_string(me) + ": host " + std::to_string(dead) +
             " is gone with the only copy of some shards: " + next.status().message());
        continue;
      }
      auto swapped = SwapMap(etcd, job, *at, *next);
      if (swapped.ok() && *swapped) {
        spdlog::warn("pserver host {}: host {} is gone; its shards fail over (replica map epoch {})", me,
                     dead, next->epoch());
        changed = true;
        break;
      }
    }
    if (changed) continue;  // read the new map
    forgot_self = true;
    const ReplicaMap& map = at->map;

    std::vector<int> live_hosts, leaving, staying;
    for (const auto& [h, m] : alive) {
      live_hosts.push_back(h);
      auto v = nlohmann::json::parse(m.value, nullptr, false);
      const bool leaves = (v.is_object() && v.value("leaving", false)) || (h == me && draining);
      (leaves ? leaving : staying).push_back(h);
    }
    if (stopping) {
      const bool others = std::any_of(staying.begin(), staying.end(), [&](int h) { return h != me; });
      if (!draining && config.initial_pservers > 0 && others && !map.PrimarySlotsOf(me).empty()) {
        // Hand the primaries over before going (an elastic job shrinking).
        nlohmann::json v = sv.info;
        v["leaving"] = true;
        if (Status u = hosts.Update(std::to_string(me), v.dump(), host.epoch, lease); u.ok()) {
          draining = true;
          drain_deadline = Now() + std::chrono::seconds(60);
          spdlog::info("pserver host {} is leaving: handing {} shards over first", me,
                       map.PrimarySlotsOf(me).size());
          continue;
        }
      }
      if (!draining || map.PrimarySlotsOf(me).empty() || !others || Now() > drain_deadline) {
        if (draining && !map.PrimarySlotsOf(me).empty()) {
          if (others) {
            spdlog::warn("pserver host {}: leaving with {} shards not handed over", me,
                         map.PrimarySlotsOf(me).size());
          } else {  // every host goes: the job is ending
            spdlog::info("pserver host {}: every host is leaving; stopping with its {} shards", me,
                         map.PrimarySlotsOf(me).size());
          }
        }
        break;
      }
    }
    const auto plan = map.RestorePlan(staying);
    const auto moves = config.initial_pservers > 0 || !leaving.empty() ? map.BalancePlan(live_hosts, leaving)
                                                                       : std::vector<ReplicaMap::Move>{};
    bool map_changed = false;
    for (int s = 0; s < shards; ++s) {
      if (map.PrimaryOf(s) != me) {
        if (claims.count(s))
          once("pserver host " + std::to_string(me) + " is no longer shard " + std::to_string(s) +
               "'s primary");
        continue;
      }
      auto service = router.Get(s);
      if (!claims.count(s)) {
        // Register, not ClaimIndex: one lease holds several shards' registrations here.
        auto epoch = shard_registry.Register(std::to_string(s), info, lease);
        if (!epoch.ok()) continue;  // its former primary's registration is still there: next time
        Claim claim;
        claim.index = s;
        claim.epoch = *epoch;
        claim.key = keys::Pserver(job, s);
        auto* c = &(claims[s] = claim);
        if (service && service->backup()) {
          if (Status p = service->Promote(c->epoch); !p.ok()) {
            spdlog::warn("pserver host {}: {}", me, p.ToString());
            service.reset();
          } else {
            nlohmann::json v = {{"epoch", c->epoch}, {"version", service->counters().version}};
            (void)etcd->Put(keys::PserverReady(job, s), v.dump(), lease);
          }
        }
        std::unique_ptr<Checkpointer> ck;
        if (!options_.checkpoint_dir.empty())
          ck = std::make_unique<Checkpointer>(etcd, job, s, c->epoch, options_.checkpoint_dir);
        if (!service) {
          service = std::make_shared<PserverService>(options_for(s, /*backup=*/false, c->epoch));
          if (ck) {
            auto latest = ck->LoadLatest();
            if (latest.ok() && *latest && service->RestoreCheckpoint(**latest).ok()) {
              ck->Continue(service->CheckpointGen());  // later deltas build on it
              spdlog::info("pserver host {}: shard {} from the checkpoint of version {}", me, s,
                           (*latest)->version);
            }
          }
          router.Set(s, service);
        }
        spdlog::info("pserver host {} serves shard {} as its primary (epoch {}, version {})", me, s, c->epoch,
                     service->counters().version);
        auto box = std::make_unique<ShardOutbox>(service.get(), sv.transport);
        service->SetOutbox(box.get());
        outboxes[s] = std::move(box);
        if (ck) {  // a promoted backup's first checkpoint is whole: its checkpointer has no chain
          const bool consistent = config.checkpoint_steps > 0;
          checkpoint_threads.emplace_back([this, svc = service.get(), ckp = ck.get(), consistent] {
            CheckpointLoop(svc, ckp, consistent);
          });
          checkpointers[s] = std::move(ck);
        }
      }
      // Streams: to every live backup, and to the hosts the restore plan gives new copies.
      ShardOutbox& box = *outboxes[s];
      std::set<int> want;
      for (size_t k = 1; k < map.HoldersOf(s).size(); ++k)
        if (alive.count(map.HoldersOf(s)[k])) want.insert(map.HoldersOf(s)[k]);
      for (const auto& c : plan)
        if (c.slot == s && c.from == me) want.insert(c.to);
      for (const auto& mv : moves)
        if (mv.slot == s && mv.from == me && alive.count(mv.to)) want.insert(mv.to);
      for (int h : box.hosts())
        if (!want.count(h) || box.EpochOf(h) != alive[h].epoch) box.RemoveStream(h);
      for (int h : want) {
        if (box.HasStream(h)) continue;
        auto eps = ParsePserverEndpoints(alive[h].value);
        if (!eps.ok()) continue;
        auto choice = ChooseEndpoint(*eps, TransportKind::kAuto, HostIdentity());
        if (!choice.ok()) continue;
        Status a = box.AddStream(h, alive[h].epoch, choice->kind, choice->endpoint);
        if (a.ok()) spdlog::info("pserver host {}: shard {} replicates to host {}", me, s, h);
      }
      for (const auto& c : plan) {
        if (c.slot != s || c.from != me || !box.Synced(c.to)) continue;
        auto next = map.WithCopies({c});
        if (!next.ok()) continue;
        auto swapped = SwapMap(etcd, job, *at, *next);
        if (swapped.ok() && *swapped) {
          spdlog::info("pserver host {}: host {} holds a copy of shard {} (holders {}; map epoch {})", me,
                       c.to, s, Holders(next->HoldersOf(s)), next->epoch());
        }
        map_changed = true;  // read it again
        break;
      }
      if (map_changed) break;
      // A move whose new host holds the shard: hand it over.
      for (const auto& mv : moves) {
        if (mv.slot != s || mv.from != me || !box.Synced(mv.to)) continue;
        service->StopServing(Status::Unavailable("shard " + std::to_string(s) + " moves to pserver host " +
                                                 std::to_string(mv.to)));
        const int64_t last = service->published();
        bool flushed = false;  // the new host has every record (at most 10 s)
        for (auto until = Now() + std::chrono::seconds(10); !flushed && Now() < until;) {
          flushed = box.Acked(mv.to) >= last;
          if (!flushed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        auto next = map.Handover(s, mv.to);
        auto swapped = flushed && next.ok() ? SwapMap(etcd, job, *at, *next) : StatusOr<bool>(false);
        if (!swapped.ok() || !*swapped) {
          service->ResumeServing();  // another change came first, or the copy lagged: next time
          map_changed = true;
          break;
        }
        (void)shard_registry.Deregister(std::to_string(s), claims[s].epoch);
        service->SetOutbox(nullptr);
        outboxes.erase(s);
        claims.erase(s);
        router.Set(s, nullptr);
        retired.push_back(service);
        spdlog::info("pserver host {}: shard {} handed over to host {} at version {} (map epoch {})", me, s,
                     mv.to, service->counters().version, next->epoch());
        map_changed = true;
        break;
      }
      if (map_changed) break;
    }
  }

  if (!result.ok()) spdlog::error("pserver host {} stops serving: {}", me, result.message());
  for (auto& s : router.All())
    if (s) s->StopServing(result.ok() ? Status::Unavailable("shutting down") : result);
  host_watch->Cancel();
  trainer_watch->Cancel();
  for (auto& [s, box] : outboxes) {
    if (auto svc = router.Get(s)) svc->SetOutbox(nullptr);
    box->Close();
  }
  for (auto& t : checkpoint_threads) t.join();
  sv.install(nullptr);
  if (result.ok()) {
    Status s = sv.keeper->Revoke();
    if (!s.ok()) spdlog::warn("could not revoke the lease: {}", s.ToString());
    spdlog::info("pserver host {} stopped", me);
  } else {
    sv.keeper->Stop();
  }
  return result;
}

}  // namespace tessera
