// PserverNode (see pserver_node.h).
#include "pserver/pserver_node.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/addressing.h"
#include "common/clock.h"
#include "common/http_limits.h"
#include "common/http_probes.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "pserver/checkpointer.h"
#include "pserver/pserver_node_metrics.h"
#include "pserver/pserver_node_serving.h"
#include "pserver/pserver_service.h"
#include "security/http_token.h"
#include "transport/endpoint_choice.h"
#include "transport/stream_io.h"
#include "transport/transport_factory.h"

namespace tessera {

namespace {

// Answers NOT_SERVING until the real service is installed (the transport must listen before the
// pserver can advertise its address and claim an index).
class Forwarder : public RequestHandler {
 public:
  void Install(RequestHandler* s) { service_.store(s); }
  void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> r) override {
    RequestHandler* s = service_.load();
    if (s) return s->Handle(header, payload, std::move(r));
    wire::DataReply reply;
    reply.set_code(static_cast<int>(StatusCode::kUnavailable));
    reply.set_message("pserver is starting up");
    reply.set_reason(wire::DataReply::NOT_SERVING);
    std::string h = reply.SerializeAsString();
    r->Send(h, {});
  }

 private:
  std::atomic<RequestHandler*> service_{nullptr};
};

}  // namespace

PserverNode::PserverNode(PserverOptions options) : options_(std::move(options)) {}
PserverNode::~PserverNode() { Stop(); }

void PserverNode::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

Status PserverNode::Run() {
  TESSERA_ASSIGN_OR_RETURN(auto etcd, etcd::EtcdClient::Create(options_.etcd));
  const std::string& job = options_.job;
  TESSERA_ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(etcd.get(), job));
  TESSERA_ASSIGN_OR_RETURN(SlotMap slots, LoadSlotMap(etcd.get(), job));
  TESSERA_ASSIGN_OR_RETURN(security::JobSecret secret,
                           LoadJobSecret(etcd.get(), job, config, options_.secret_file));
  TESSERA_ASSIGN_OR_RETURN(
      auto tls, LoadJobTls(job, config, options_.tls_ca_file, options_.tls_cert_file, options_.tls_key_file));

  TESSERA_ASSIGN_OR_RETURN(TransportKind kind, ParseTransportKind(options_.transport));
  // auto serves every transport: each trainer takes the best one it can reach. --port goes to
  // the main transport (tcp when served); the others take free ports.
  std::vector<TransportKind> kinds =
      kind == TransportKind::kAuto
          ? std::vector<TransportKind>{TransportKind::kTcp, TransportKind::kShm, TransportKind::kGrpc}
          : std::vector<TransportKind>{kind};
  const std::string advertise = options_.advertise.empty() ? options_.host : options_.advertise;
  // Requests without the job's secret are refused and counted (served in /metrics below).
  metrics::Registry prom;
  TransportOptions to;
  to.limits.max_payload = options_.max_message_bytes;
  to.secret = secret;
  to.tls = tls;
  to.busy_poll = options_.busy_poll;
  to.auth_refused =
      &prom.GetCounter("tessera_pserver_auth_refused_total",
                       "Data-plane requests and connections refused for lacking the job's secret");
  Forwarder forwarder;
  std::vector<std::unique_ptr<ServerTransport>> servers;
  nlohmann::json endpoints = nlohmann::json::object();
  for (TransportKind k : kinds) {
    auto server = NewServerTransport(k, to);
    TESSERA_RETURN_IF_ERROR(server->Start(options_.host, servers.empty() ? options_.port : 0, &forwarder));
    endpoints[TransportKindName(k)] = AdvertisedEndpoint(server->endpoint(), advertise);
    servers.push_back(std::move(server));
  }
  struct ServersStop {
    std::vector<std::unique_ptr<ServerTransport>>& s;
    ~ServersStop() {
      for (auto& x : s) x->Shutdown();
    }
  } servers_stop{servers};
  const std::string address = AdvertisedEndpoint(servers[0]->endpoint(), advertise);

  std::unique_ptr<PserverService> service;
  std::mutex service_mu;  // guards `service` against the lease listener
  auto on_lease = [&](LeaseState s) {
    std::lock_guard<std::mutex> lock(service_mu);
    if (s == LeaseState::kAlive) {
      if (service) service->ResumeServing();
      return;
    }
    if (service) service->StopServing(Status::Unavailable(std::string("its lease is ") + LeaseStateName(s)));
    if (s == LeaseState::kLost) {
      std::lock_guard<std::mutex> l2(mu_);
      lost_ = true;
      lost_reason_ = Status::Aborted("lease lost");
      cv_.notify_all();
    }
  };
  TESSERA_ASSIGN_OR_RETURN(auto keeper,
                           LeaseKeeper::Start(etcd.get(), {options_.lease_ttl_seconds, {}}, on_lease));

  // Prometheus metrics, served before the claim so the address goes into the registration.
  PserverService* metrics_source = nullptr;  // set once the service exists (guarded by service_mu)
  PserverService::Counters last_counters;
  prom_ = &prom;
  httplib::Server http;
  // /metrics binds to loopback unless told otherwise; anywhere else it asks for the job's console
  // token (common/http_access.h).
  const std::string http_host = options_.http_host.empty() ? "127.0.0.1" : options_.http_host;
  TESSERA_ASSIGN_OR_RETURN(auto http_access, security::HttpAccessFor(http_host, secret, job));
  LimitHttpRequests(http, kMaxHttpRequestBody, nullptr, 0, http_access);
  http.set_tcp_nodelay(true);  // else a kept-alive client waits 40 ms for each answer (delayed ACK)
  std::thread http_thread;
  nlohmann::json info = {{"address", address},
                         {"host", advertise},
                         {"pid", static_cast<int64_t>(::getpid())},
                         {"transport", options_.transport},
                         {"endpoints", endpoints},
                         {"host_id", HostIdentity()},
                         {"started_ms", WallMillis()}};
  if (!options_.checkpoint_dir.empty()) info["checkpoint_dir"] = options_.checkpoint_dir;
  if (options_.http_port >= 0) {
    http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(service_mu);
        if (metrics_source) RefreshMetrics(*metrics_source, prom, &last_counters, last_checkpoint_ms_.load());
      }
      res.set_content(prom.Render(), "text/plain; version=0.0.4");
    });
    // Probes: alive while the process answers; ready while it serves an index.
    AddProbes(http, [&](std::string* why) {
      int index = index_.load();
      std::lock_guard<std::mutex> lock(service_mu);
      if (config.hosted()) {  // a host of a replicated or elastic job: ready once it has its host index
        *why = index >= 0 ? "pserver host " + std::to_string(index) : "no host index yet";
        return index >= 0;
      }
      bool serving = metrics_source != nullptr && index >= 0;
      *why = serving ? "serving index " + std::to_string(index) : "no index served yet";
      return serving;
    });
    // For the console's nodes panel (the master asks).
    http.Get("/stats", [&](const httplib::Request&, httplib::Response& res) {
      nlohmann::json j = {{"index", index_.load()}};
      {
        std::lock_guard<std::mutex> lock(service_mu);
        if (metrics_source) {
          auto c = metrics_source->counters();
          j.update(StatsJson(c, index_.load() >= 0 ? slots.SlotsOf(index_.load()).size() : 0));
        }
      }
      res.set_content(j.dump(), "application/json");
    });
    int http_port = options_.http_port == 0
                        ? http.bind_to_any_port(http_host)
                        : (http.bind_to_port(http_host, options_.http_port) ? options_.http_port : -1);
    if (http_port <= 0) {
      return Status::Unavailable("cannot listen for /metrics on " + http_host + ":" +
                                 std::to_string(options_.http_port));
    }
    http_thread = ServeInBackground(http);
    const bool at_node = http_host == options_.host || IsWildcardHost(http_host);
    info["metrics"] = "http://" + JoinHostPort(at_node ? advertise : http_host, http_port) + "/metrics";
  }
  struct HttpStop {
    httplib::Server& s;
    std::thread& t;
    ~HttpStop() {
      s.stop();
      if (t.joinable()) t.join();
    }
  } http_stop{http, http_thread};

  if (config.hosted()) {
    Serving serving{
        etcd.get(), config, slots, keeper.get(), to, info, [&](RequestHandler* h) { forwarder.Install(h); },
        &prom};
    return RunReplicated(serving);
  }

  // Claim the lowest free index, waiting for one to free up if all are taken.
  Registry registry(etcd.get(), keys::PserverPrefix(job));
  Claim claim;
  auto waiting_since = Now();
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return Status::OK();
    }
    auto c = registry.ClaimIndex(config.pservers, info.dump(), keeper->id(), options_.index);
    if (c.ok()) {
      claim = *c;
      break;
    }
    if (c.status().code() != StatusCode::kResourceExhausted) return c.status();
    if (Now() - waiting_since > std::chrono::seconds(10)) {
      if (options_.index >= 0) {
        spdlog::info("pserver index {} of job {} is taken; waiting for it to free up", options_.index, job);
      } else {
        spdlog::info("all {} pserver indices of job {} are taken; waiting for one to free up",
                     config.pservers, job);
      }
      waiting_since = Now();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stop_; });
  }
  index_ = claim.index;
  epoch_ = claim.epoch;
  SetLogNode("pserver-" + std::to_string(claim.index));
  std::string served;
  for (const auto& [k, v] : endpoints.items())
    served += (served.empty() ? "" : ", ") + k + " " + v.get<std::string>();
  spdlog::info("pserver {} serving at {} (epoch {}, {} of {} slots, mode {}; data plane: {})", claim.index,
               address, claim.epoch, slots.SlotsOf(claim.index).size(), slots.slots(), config.mode.ToString(),
               served);

  PserverServiceOptions so;
  so.index = claim.index;
  so.epoch = claim.epoch;
  so.job = config;
  so.slots = slots;
  so.lease_alive = [k = keeper.get()] { return k->state() == LeaseState::kAlive; };
  so.job_name = job;
  so.metrics = &prom;
  so.delta_policy.max_fraction = options_.checkpoint_delta_fraction;
  so.apply_threads = options_.apply_threads;
  const bool consistent = !options_.checkpoint_dir.empty() && config.checkpoint_steps > 0;
  if (consistent) {
    so.snapshot_every = config.checkpoint_steps;
    so.snapshot_due = [this] { WakeCheckpointThreads(); };
    spdlog::info(
        "pserver {}: consistent checkpoints at every version that is a multiple of {} (the job's checkpoint "
        "steps){}",
        claim.index, config.checkpoint_steps,
        options_.checkpoint_seconds > 0 || options_.checkpoint_steps > 0
            ? "; --checkpoint-every/--checkpoint-steps do not apply"
            : "");
  }
  so.on_initialized = [&etcd, &job, claim, lease = keeper->id()](int64_t version) -> Status {
    nlohmann::json v = {{"epoch", claim.epoch}, {"version", version}};
    return etcd->Put(keys::PserverReady(job, claim.index), v.dump(), lease).status();
  };
  {
    std::lock_guard<std::mutex> lock(service_mu);
    service = std::make_unique<PserverService>(so);
    metrics_source = service.get();
    if (keeper->state() != LeaseState::kAlive)
      service->StopServing(Status::Unavailable("its lease is in doubt"));
  }
  std::unique_ptr<Checkpointer> checkpointer;
  if (!options_.checkpoint_dir.empty()) {
    checkpointer =
        std::make_unique<Checkpointer>(etcd.get(), job, claim.index, claim.epoch, options_.checkpoint_dir);
    TESSERA_ASSIGN_OR_RETURN(auto latest, checkpointer->LoadLatest());
    if (!latest) {
      spdlog::info("pserver {}: no usable checkpoint in {}; a trainer initializes the shard", claim.index,
                   options_.checkpoint_dir);
    } else if (Status s = service->RestoreCheckpoint(*latest); !s.ok()) {
      spdlog::error(
          "pserver {}: the checkpoint of version {} does not fit this job ({}); a trainer initializes the "
          "shard instead",
          claim.index, latest->version, s.ToString());
    } else {
      checkpointer->Continue(service->CheckpointGen());
      spdlog::info(
          "pserver {}: loaded the checkpoint of version {} from {} ({} dense blocks, {} sparse tables)",
          claim.index, latest->version, options_.checkpoint_dir, latest->shard.dense.size(),
          latest->shard.sparse.size());
    }
  }
  forwarder.Install(service.get());
  std::thread checkpoint_thread;
  if (checkpointer)
    checkpoint_thread =
        std::thread([&, consistent] { CheckpointLoop(service.get(), checkpointer.get(), consistent); });

  // Trainers whose registration disappears leave the consistency group.
  std::map<std::string, int64_t> trainers;
  std::mutex trainers_mu;
  auto trainer_watch = Registry(etcd.get(), keys::TrainerPrefix(job)).Watch([&](const MemberList& list) {
    std::lock_guard<std::mutex> lock(trainers_mu);
    std::map<std::string, int64_t> now;
    for (const auto& m : list.members) now[m.name] = m.epoch;
    for (const auto& [name, epoch] : trainers) {
      auto it = now.find(name);
      if (it == now.end() || it->second != epoch) service->TrainerLeft(name, epoch);
    }
    trainers = std::move(now);
  });
  // Our own key going away (revoked, expired, deleted) means we must stop at once.
  auto self_watch = registry.Watch([&](const MemberList& list) {
    const Member* me = list.Find(std::to_string(claim.index));
    if (me && me->epoch == claim.epoch) return;
    service->StopServing(Status::Unavailable("its registration " + claim.key + " is gone"));
    std::lock_guard<std::mutex> lock(mu_);
    if (!lost_) {
      lost_ = true;
      lost_reason_ = Status::Aborted("registration " + claim.key + " (epoch " + std::to_string(claim.epoch) +
                                     ") is gone");
    }
    cv_.notify_all();
  });

  Status result;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || lost_; });
    if (lost_) result = lost_reason_;
  }
  if (checkpoint_thread.joinable()) checkpoint_thread.join();
  if (!result.ok()) spdlog::error("pserver {} stops serving: {}", claim.index, result.message());
  service->StopServing(result.ok() ? Status::Unavailable("shutting down") : result);
  self_watch->Cancel();
  trainer_watch->Cancel();
  for (auto& s : servers) s->Shutdown();
  forwarder.Install(nullptr);
  if (result.ok()) {
    // A clean exit frees the index at once for a successor.
    Status s = keeper->Revoke();
    if (!s.ok()) spdlog::warn("could not revoke the lease: {}", s.ToString());
    const std::string polling = SpinSummary(SpinCountersNow());
    spdlog::info("pserver {} stopped; {}{}{}", claim.index, MemorySummary(service->counters()),
                 polling.empty() ? "" : "; ", polling);
  } else {
    keeper->Stop();
  }
  {
    std::lock_guard<std::mutex> lock(service_mu);
    metrics_source = nullptr;
    service.reset();
  }
  return result;
}

void PserverNode::ObserveCheckpoint(double seconds, int64_t version) {
  last_checkpoint_ms_ = WallMillis();
  if (!prom_) return;
  prom_
      ->GetHistogram("tessera_pserver_checkpoint_seconds", "time to copy, write and record a checkpoint",
                     metrics::LatencyBuckets())
      .Observe(seconds);
  prom_->GetGauge("tessera_pserver_checkpoint_version", "version of the last checkpoint recorded")
      .Set(static_cast<double>(version));
}

void PserverNode::WakeCheckpointThreads() {
  // Without the lock (the service calls this under its own): a wake between a thread's check of
  // the count and its wait is seen at its next timeout (20 ms).
  snapshot_wakes_.fetch_add(1);
  cv_.notify_all();
}

void PserverNode::CheckpointLoop(PserverService* service, Checkpointer* checkpointer, bool consistent) {
  int64_t last_version = -1;
  TimePoint last_time = Now();
  service->SetCheckpointChain(checkpointer->chain());
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t woken = snapshot_wakes_.load();
  while (!stop_ && !lost_) {
    cv_.wait_for(lock, std::chrono::milliseconds(consistent ? 20 : 100),
                 [&] { return stop_ || lost_ || snapshot_wakes_.load() != woken; });
    woken = snapshot_wakes_.load();
    if (stop_ || lost_) break;
    lock.unlock();
    // The service took the copies at the due versions (or, for a checkpoint asked for while a
    // step's blocks were partly applied, at the barrier after it); write them all, oldest first:
    // every pserver of the job must hold the same versions.
    bool wrote = false;
    while (auto taken = service->TakeDueSnapshot()) {
      wrote = true;
      auto written = Now();
      const int64_t version = taken->version;
      auto rec = checkpointer->Save(std::move(*taken));
      service->SetCheckpointChain(checkpointer->chain());
      if (rec.ok()) {
        spdlog::info("pserver {}: consistent checkpoint of version {} recorded ({}; {} ms writing)",
                     index_.load(), version, rec->Describe(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(Now() - written).count());
        last_version = version;
        last_time = Now();
      } else {
        spdlog::error("{}pserver {}: checkpoint of version {} failed: {}", kNoticeMark, index_.load(),
                      version, rec.status().ToString());
      }
    }
    if (consistent || wrote) {
      lock.lock();
      continue;
    }
    int64_t v = service->CheckpointableVersion();
    double since = std::chrono::duration<double>(Now() - last_time).count();
    bool due =
        v >= 0 && v != last_version &&
        (last_version < 0 || (options_.checkpoint_seconds > 0 && since >= options_.checkpoint_seconds) ||
         (options_.checkpoint_steps > 0 && v - last_version >= options_.checkpoint_steps));
    if (due) {
      auto start = Now();
      auto c = service->SnapshotForCheckpoint(options_.job);
      auto copied = Now();
      if (c.ok()) {
        const int64_t version = c->version;
        auto rec = checkpointer->Save(std::move(*c));
        service->SetCheckpointChain(checkpointer->chain());
        if (rec.ok()) {
          ObserveCheckpoint(std::chrono::duration<double>(Now() - start).count(), version);
          spdlog::info(
              "pserver {}: checkpoint of version {} recorded ({}; {} ms copying under the lock, {} ms "
              "writing)",
              index_.load(), version, rec->Describe(),
              std::chrono::duration_cast<std::chrono::milliseconds>(copied - start).count(),
              std::chrono::duration_cast<std::chrono::milliseconds>(Now() - copied).count());
          last_version = version;
        } else {
          spdlog::error("{}pserver {}: checkpoint of version {} failed: {}", kNoticeMark, index_.load(),
                        version, rec.status().ToString());
        }
      }
      last_time = Now();  // also after a failure: retry at the next period, not at once
    }
    lock.lock();
  }
}

}  // namespace tessera
