// MasterNode (see master_node.h).
#include "master/master_node.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <thread>

#include "common/addressing.h"
#include "common/clock.h"
#include "common/logging.h"
#include "coord/election.h"
#include "coord/keys.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "dataset/dataset.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "master/checkpoint_view.h"
#include "master/console_server.h"
#include "master/console_state.h"
#include "master/follow_poll.h"
#include "master/master_service.h"
#include "master/queue_load.h"
#include "master/replica_tracker.h"
#include "master/run_history.h"
#include "master/state_log.h"
#include "master/task_layout.h"
#include "security/grpc_tls.h"
#include "security/http_token.h"

namespace tessera::master {
namespace {

// Saves a consistent checkpoint's data position, fenced by the election; keeps the newest four.
Status SavePosition(etcd::EtcdClient* etcd, const std::string& job, const Fence& fence,
                    const DataPosition& p) {
  etcd::GetOptions list;
  list.prefix = true;
  list.keys_only = true;
  list.sort = etcd::GetOptions::Sort::kKeyAscend;
  TESSERA_ASSIGN_OR_RETURN(auto old, etcd->Get(keys::PositionPrefix(job), list));
  etcd::Txn txn;
  txn.success.push_back(etcd::Op::Put(keys::Position(job, p.version), p.ToJson()));
  const std::string mine = keys::Position(job, p.version);
  std::vector<std::string> older;
  for (const auto& kv : old.kvs) {
    if (kv.key < mine) older.push_back(kv.key);
  }
  for (size_t i = 0; i + 3 < older.size(); ++i) txn.success.push_back(etcd::Op::Delete(older[i]));
  return Election::FencedCommit(etcd, fence, txn).status();
}

// Applies a rollback order newer than the queue's last one: the model was rolled back to the
// consistent checkpoint of a version, so the queue goes back to that version's data position.
Status ApplyRollback(etcd::EtcdClient* etcd, const std::string& job, TaskQueue* queue, StateLog* log,
                     const std::string& settings, int64_t seq) {
  TESSERA_ASSIGN_OR_RETURN(auto order, etcd->Get(keys::Rollback(job)));
  if (order.kvs.empty()) return Status::OK();
  auto j = nlohmann::json::parse(order.kvs[0].value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("version") || !j.contains("generation")) {
    return Status::DataLoss("rollback order at " + keys::Rollback(job) +
                            " is not {version, generation}: " + order.kvs[0].value);
  }
  int64_t version = j["version"].get<int64_t>(), generation = j["generation"].get<int64_t>();
  if (generation <= queue->rewind_generation()) return Status::OK();
  TESSERA_ASSIGN_OR_RETURN(auto saved, etcd->Get(keys::Position(job, version)));
  DataPosition position = DataPosition::Start(queue->tasks());
  if (!saved.kvs.empty()) {
    TESSERA_ASSIGN_OR_RETURN(position, DataPosition::FromJson(saved.kvs[0].value, queue->tasks()));
  } else if (version != 0) {
    return Status::FailedPrecondition("rollback to version " + std::to_string(version) +
                                      " ordered, but no data position is saved for it at " +
                                      keys::Position(job, version));
  }
  TESSERA_RETURN_IF_ERROR(queue->Rewind(position, generation));
  TESSERA_RETURN_IF_ERROR(log->WriteBase(settings, queue->Snapshot(), seq));
  spdlog::info("rolled back to the data position of version {} (rollback {}): pass {}, {} tasks in part",
               version, generation, position.pass + 1, position.partial.size());
  return Status::OK();
}

std::string CostKey(const std::string& job, int64_t seq) {
  std::string v = std::to_string(seq);
  return keys::MetricsPrefix(job) + "cost/" + std::string(v.size() < 20 ? 20 - v.size() : 0, '0') + v;
}

// The console's cost history survives the master: batches of points under metrics/cost/<seq>,
// the newest 200 batches kept (fenced writes).
class CostSaver {
 public:
  CostSaver(etcd::EtcdClient* etcd, std::string job) : etcd_(etcd), job_(std::move(job)) {}

  std::vector<CostPoint> Load() {
    etcd::GetOptions o;
    o.prefix = true;
    auto r = etcd_->Get(keys::MetricsPrefix(job_) + "cost/", o);
    std::vector<CostPoint> out;
    if (!r.ok()) return out;
    for (const auto& kv : r->kvs) {
      auto pts = CostHistory::FromJson(kv.value);
      if (!pts.ok()) {
        spdlog::warn("cost history batch {} is unreadable and skipped: {}", kv.key, pts.status().ToString());
        continue;
      }
      out.insert(out.end(), pts->begin(), pts->end());
      keys_.push_back(kv.key);
    }
    if (!out.empty()) saved_ = out.back().seq;
    return out;
  }

  // From the saving thread and from a report with evaluations: one at a time.
  void Save(const MasterService& service, const Fence& fence) {
    std::lock_guard<std::mutex> lock(mu_);
    auto points = service.CostSince(saved_);
    if (points.empty()) return;
    etcd::Txn txn;
    const std::string key = CostKey(job_, points.front().seq);
    txn.success.push_back(etcd::Op::Put(key, CostHistory::ToJson(points)));
    while (keys_.size() >= 200) {
      txn.success.push_back(etcd::Op::Delete(keys_.front()));
      keys_.erase(keys_.begin());
    }
    if (!Election::FencedCommit(etcd_, fence, txn).ok()) return;  // tried again next time
    keys_.push_back(key);
    saved_ = points.back().seq;
  }

 private:
  etcd::EtcdClient* etcd_;
  std::string job_;
  std::mutex mu_;  // guards keys_ and saved_
  std::vector<std::string> keys_;
  int64_t saved_ = 0;
};

// Registrations as the console's node history sees them.
std::vector<NodeTracker::Live> LiveNodes(const MemberList& l) {
  std::vector<NodeTracker::Live> out;
  for (const auto& m : l.members) {
    auto j = nlohmann::json::parse(m.value, nullptr, false);
    std::string address = !j.is_discarded() && j.is_object() ? j.value("address", "") : "";
    out.push_back({m.name, m.epoch, address, m.value});
  }
  return out;
}

// Updates the console's trainers from `l`: a trainer gone since the last update that left a
// trainers-left record for its registration deregistered on purpose ("finished"), not "lost".
void UpdateTrainers(etcd::EtcdClient* etcd, const std::string& job, const MemberList& l, NodeTracker* nodes) {
  auto live = LiveNodes(l);
  std::map<std::string, int64_t> left;
  for (const auto& name : nodes->Departing("trainer", live)) {
    auto kv = etcd->Get(keys::TrainerLeft(job, name));
    if (!kv.ok() || kv->kvs.empty()) continue;
    auto j = nlohmann::json::parse(kv->kvs[0].value, nullptr, false);
    if (j.is_object()) left[name] = j.value("epoch", int64_t{0});
  }
  nodes->Update("trainer", live, WallMillis(), left, l.revision);
}

}  // namespace

void MasterNode::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

Status MasterNode::Run() {
  TESSERA_ASSIGN_OR_RETURN(auto etcd, etcd::EtcdClient::Create(options_.etcd));
  const std::string& job = options_.job;
  TESSERA_ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(etcd.get(), job));
  std::string dir = options_.store + "/" + options_.dataset;
  TESSERA_ASSIGN_OR_RETURN(dataset::Manifest manifest, dataset::LoadManifest(dir));
  if (manifest.chunks.empty())
    return Status::InvalidArgument("data set '" + options_.dataset + "' has no chunks");
  TaskQueueOptions qo = options_.queue;
  qo.chunks = static_cast<int64_t>(manifest.chunks.size());
  for (const auto& c : manifest.chunks) qo.chunk_records.push_back(c.records);
  if (qo.min_tasks < 0) qo.min_tasks = std::max(8, 4 * config.min_trainers);
  // 0: about 4 MiB of records a task (a growing data set's appended chunks are a task each).
  if (qo.chunks_per_task == 0) {
    std::vector<uint64_t> raw;
    for (const auto& c : manifest.chunks) raw.push_back(c.raw_bytes > 0 ? c.raw_bytes : c.bytes);
    qo.chunks_per_task = qo.follow ? 1 : AutoChunksPerTask(raw, qo.min_tasks);
  }
  // Idle trainers take the rest of a slow one's task, in parts of a batch or more. Not with
  // consistent checkpoints: their data positions name whole tasks.
  qo.split_min_records = config.checkpoint_steps > 0 || !options_.split_tasks || qo.follow
                             ? 0
                             : std::max<int64_t>(32, qo.min_task_records);
  if (qo.follow && config.checkpoint_steps > 0) {
    return Status::InvalidArgument(
        "a job that follows its data set (--follow) cannot have consistent checkpoints (checkpoint steps)");
  }
  TESSERA_RETURN_IF_ERROR(qo.Validate());

  TESSERA_ASSIGN_OR_RETURN(security::JobSecret secret,
                           LoadJobSecret(etcd.get(), job, config, options_.secret_file));
  TESSERA_ASSIGN_OR_RETURN(
      auto tls, LoadJobTls(job, config, options_.tls_ca_file, options_.tls_cert_file, options_.tls_key_file));
  MasterService service(config.token, secret, dir, manifest);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.host + ":" + std::to_string(options_.port),
                           security::GrpcServerCredentials(tls.get()), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) {
    return Status::Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  const std::string advertise = options_.advertise.empty() ? options_.host : options_.advertise;
  const std::string address = JoinHostPort(advertise, port);

  auto on_lease = [&](LeaseState s) {
    if (s == LeaseState::kAlive) return;
    service.Stop(Status::Unavailable(std::string("its lease is ") + LeaseStateName(s)));
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_.ok()) lost_ = Status::Aborted(std::string("lease ") + LeaseStateName(s));
    cv_.notify_all();
  };
  TESSERA_ASSIGN_OR_RETURN(auto keeper,
                           LeaseKeeper::Start(etcd.get(), {options_.lease_ttl_seconds, {}}, on_lease));
  Election election(etcd.get(), keys::MasterElectionPrefix(job), keeper->id());
  nlohmann::json info = {
      {"address", address}, {"pid", static_cast<int64_t>(::getpid())}, {"started_ms", WallMillis()}};

  // The console: up before the campaign, so its address is in the election value; a standby's
  // answers 503 until it leads.
  std::mutex nodes_mu;
  NodeTracker nodes;
  ConsoleSources cs;
  cs.job = job;
  cs.config = nlohmann::json::parse(config.ToJson());
  cs.config.erase("token");
  cs.status = [&service]() -> StatusOr<StatusReply> {
    StatusReply reply;
    grpc::Status s = service.Summary(&reply);
    if (!s.ok()) return Status::Unavailable("this master is not leading (yet): " + s.error_message());
    return reply;
  };
  cs.cost_since = [&service](int64_t since) { return service.CostSince(since); };
  cs.nodes = [&] {
    std::lock_guard<std::mutex> lock(nodes_mu);
    return nodes.Nodes();
  };
  struct Rate {
    int64_t time_ms = 0;
    int64_t pushes = 0;
    double per_second = 0;
  };
  std::mutex rates_mu;
  std::map<int, Rate> rates;
  CheckpointView checkpoints;
  ReplicaTracker replicas(config.initial_pservers > 0);  // a replicated or elastic job's shards
  if (config.hosted()) cs.replicas = [&replicas] { return replicas.View(); };
  cs.pserver_extra = [&etcd, &job, &rates_mu, &rates, &checkpoints](int index) {
    nlohmann::json extra = nlohmann::json::object();
    auto reg = etcd->Get(keys::Pserver(job, index));
    nlohmann::json info;
    if (reg.ok() && !reg->kvs.empty()) info = nlohmann::json::parse(reg->kvs[0].value, nullptr, false);
    if (!info.is_object()) info = nlohmann::json::object();
    auto ck = etcd->Get(keys::Checkpoint(job, index));
    if (ck.ok() && !ck->kvs.empty())
      extra["checkpoints"] =
          checkpoints.Records(job, index, ck->kvs[0].value, info.value("checkpoint_dir", ""));
    // The pserver's own numbers, from its /stats (short timeouts: a dead one must not stall the page).
    {
      std::smatch m;
      std::string url = info.value("metrics", "");
      if (std::regex_match(url, m, std::regex("http://([^:/]+):([0-9]+)/metrics"))) {
        httplib::Client c(m[1].str(), std::stoi(m[2].str()));
        c.set_connection_timeout(0, 300000);
        c.set_read_timeout(0, 500000);
        auto r = c.Get("/stats");
        auto stats =
            r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
        if (stats.is_object() && stats.contains("pushes")) {
          std::lock_guard<std::mutex> lock(rates_mu);
          Rate& rate = rates[index];
          int64_t now = WallMillis(), pushes = stats["pushes"].get<int64_t>();
          if (rate.time_ms > 0 && now - rate.time_ms >= 500 && pushes >= rate.pushes) {
            rate.per_second = (pushes - rate.pushes) * 1000.0 / static_cast<double>(now - rate.time_ms);
          }
          if (rate.time_ms == 0 || now - rate.time_ms >= 500) {
            rate.time_ms = now;
            rate.pushes = pushes;
          }
          stats["pushes_per_second"] = rate.per_second;
          extra["stats"] = stats;
        }
      }
    }
    auto ready = etcd->Get(keys::PserverReady(job, index));
    if (ready.ok() && !ready->kvs.empty())
      extra["ready"] = nlohmann::json::parse(ready->kvs[0].value, nullptr, false);
    return extra;
  };
  cs.log_dir = options_.log_dir;
  cs.web_dir = FindConsolePage(options_.web_dir);
  cs.metrics = &service.metrics();
  cs.before_metrics = [&service] { service.RefreshMetrics(); };
  cs.started_ms = WallMillis();
  ConsoleServer console(cs);
  if (options_.http_port >= 0) {
    // The console binds to loopback unless told otherwise; anywhere else it asks for the job's
    // console token (common/http_access.h). It is advertised at the node's address when it binds
    // there or everywhere.
    const std::string http_host = options_.http_host.empty() ? "127.0.0.1" : options_.http_host;
    TESSERA_ASSIGN_OR_RETURN(auto access, security::HttpAccessFor(http_host, secret, job));
    TESSERA_ASSIGN_OR_RETURN(int http_port, console.Start(http_host, options_.http_port, access));
    const bool at_node = http_host == options_.host || IsWildcardHost(http_host);
    info["console"] = "http://" + JoinHostPort(at_node ? advertise : http_host, http_port) + "/";
    spdlog::info("console and /metrics at {}{}", info["console"].get<std::string>(),
                 access->open() ? "" : " (with the job's console token: `tessera status` prints the link)");
  }
  spdlog::info("master at {} campaigning to lead job {} (standby until then)", address, job);
  Status won = election.Campaign(info.dump(), [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_ || !lost_.ok();
  });
  if (!won.ok()) {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    keeper->Stop();
    if (won.code() == StatusCode::kCancelled) {
      std::lock_guard<std::mutex> lock(mu_);
      return lost_.ok() ? Status::OK() : lost_;
    }
    return won;
  }
  SetLogNode("master");

  // Load (or create) the queue and replay the log.
  StateLog log(etcd.get(), job, election.fence(), options_.compact_every);
  TESSERA_ASSIGN_OR_RETURN(LeadQueue lead,
                           LoadOrCreateQueue(log, job, manifest, qo, election.fence().revision));
  std::unique_ptr<TaskQueue> queue = std::move(lead.queue);
  qo = lead.options;
  int64_t seq = lead.seq;
  const std::string settings = lead.settings;
  TESSERA_RETURN_IF_ERROR(ApplyRollback(etcd.get(), job, queue.get(), &log, settings, seq));
  if (qo.follow) {
    // The chunks a former leader added may be newer than the manifest read at the start.
    TESSERA_ASSIGN_OR_RETURN(dataset::Manifest now, dataset::LoadManifest(dir));
    TESSERA_RETURN_IF_ERROR(service.SetChunks(std::move(now.chunks), queue->chunks()));
  }
  CostSaver cost_saver(etcd.get(), job);
  service.RestoreCost(cost_saver.Load());
  log.Start(seq, settings);
  service.SetEvaluationSaver([&] { cost_saver.Save(service, election.fence()); });
  if (config.checkpoint_steps > 0) {
    service.SetPositionSaver([&etcd, &job, fence = election.fence()](const DataPosition& p) {
      return SavePosition(etcd.get(), job, fence, p);
    });
  }
  service.Activate(std::move(queue), &log, election.fence().revision);
  leading_ = true;

  auto trainers = Registry(etcd.get(), keys::TrainerPrefix(job)).Watch([&](const MemberList& l) {
    service.TrainersChanged(l);
    std::lock_guard<std::mutex> lock(nodes_mu);
    UpdateTrainers(etcd.get(), job, l, &nodes);
  });
  service.TrainersChanged(trainers->Snapshot());
  auto pservers = Registry(etcd.get(), keys::PserverPrefix(job)).Watch([&](const MemberList& l) {
    std::lock_guard<std::mutex> lock(nodes_mu);
    nodes.Update("pserver", LiveNodes(l), WallMillis(), {}, l.revision);
  });
  std::unique_ptr<RunHistoryWriter> history;
  if (!options_.history_file.empty()) {
    auto w = RunHistoryWriter::Open(options_.history_file);
    if (w.ok()) {
      history = std::move(*w);
      history->Job(job, cs.config);
    } else {
      spdlog::warn("no history file: {}", w.status().message());
    }
  }
  // The console's history to the run's file (every 2 s, and when leading ends).
  auto write_history = [&] {
    if (!history) return;
    history->Points(service.CostSince(history->last_seq()));
    {
      std::lock_guard<std::mutex> nl(nodes_mu);
      history->Nodes(nodes.Nodes(), WallMillis());
    }
    if (auto st = cs.status(); st.ok()) history->Status(*st, WallMillis());
  };
  std::optional<FollowPoll> follow;
  if (qo.follow) follow.emplace(etcd.get(), job, dir, &service);
  std::thread ticker([&] {
    std::unique_lock<std::mutex> lock(mu_);
    auto next_save = SteadyClock::now();
    auto next_follow = SteadyClock::now();
    while (!stop_ && lost_.ok()) {
      lock.unlock();
      service.Tick(SteadyMillis());
      if (follow && SteadyClock::now() >= next_follow) {
        next_follow = SteadyClock::now() + std::chrono::seconds(1);
        follow->Poll();
      }
      if (config.hosted()) replicas.Poll(etcd.get(), job, WallMillis());
      if (SteadyClock::now() >= next_save) {
        next_save = SteadyClock::now() + std::chrono::seconds(2);
        cost_saver.Save(service, election.fence());
        // Registrations still in etcd have live leases: that is the nodes' heartbeat.
        if (auto l = Registry(etcd.get(), keys::PserverPrefix(job)).List(); l.ok()) {
          std::lock_guard<std::mutex> nl(nodes_mu);
          nodes.Update("pserver", LiveNodes(*l), WallMillis(), {}, l->revision);
        }
        if (auto l = Registry(etcd.get(), keys::TrainerPrefix(job)).List(); l.ok()) {
          std::lock_guard<std::mutex> nl(nodes_mu);
          UpdateTrainers(etcd.get(), job, *l, &nodes);
        }
        write_history();
      }
      if (Status f = log.failure(); !f.ok()) {
        service.Stop(f);
        std::lock_guard<std::mutex> l2(mu_);
        if (lost_.ok()) lost_ = f.code() == StatusCode::kAborted ? f : Status::Aborted(f.message());
        cv_.notify_all();
      }
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  });

  Status result;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || !lost_.ok(); });
    result = lost_;
  }
  leading_ = false;
  ticker.join();
  cost_saver.Save(service, election.fence());
  write_history();
  pservers->Cancel();
  trainers->Cancel();
  console.Stop();
  service.Stop(result.ok() ? Status::Unavailable("master stopped") : result);
  log.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  if (result.ok()) {
    (void)election.Resign();  // a standby takes over now, not after the lease TTL
    (void)keeper->Revoke();
    spdlog::info("master stopped");
  } else {
    spdlog::error("master stops leading: {}", result.message());
    keeper->Stop();
  }
  return result;
}

}  // namespace tessera::master
