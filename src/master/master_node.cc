// MasterNode (see master_node.h): Run, as the phases of one MasterNode::Runtime: Prepare (etcd,
// the job, the data set, the queue's options), Listen (gRPC), KeepLease, ServeConsole (up
// before the campaign, so its address is in the election value; a standby's answers 503),
// Campaign, Lead (the queue loaded or created, the log replayed, a rollback applied), Watch
// (trainers and pservers, for the service and the console), the ticker (timeouts, saving,
// history), Serve (until stopped or lost), and Drain.
#include "master/master_node.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <thread>

#include "common/addressing.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/node_http.h"
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
#include "master/leader_records.h"
#include "master/master_service.h"
#include "master/queue_load.h"
#include "master/replica_tracker.h"
#include "master/run_history.h"
#include "master/state_log.h"
#include "master/task_layout.h"
#include "security/grpc_tls.h"
#include "security/http_token.h"

namespace tessera::master {

class MasterNode::Runtime {
 public:
  explicit Runtime(MasterNode* node) : node_(node), o_(node->options_) {}
  ~Runtime();

  Status Prepare();
  Status Listen();
  Status KeepLease();
  Status ServeConsole();
  // True once leading; else the run ends with `*end` (OK when stopped while standing by).
  bool Campaign(Status* end);
  Status Lead();
  void Watch();
  void StartTicker();
  Status Serve();
  void Drain(const Status& result);

 private:
  Status QueueOptions();
  void OnLease(LeaseState s);
  ConsoleSources Sources();
  nlohmann::json PserverExtra(int index);
  // A pserver's /stats, with its pushes per second since the last look (short timeouts: a dead
  // one must not stall the page). Null if it does not answer.
  nlohmann::json PserverStats(int index, const std::string& metrics_url);
  void Tick(SteadyClock::time_point* next_save, SteadyClock::time_point* next_follow);
  void SaveNodesAndHistory();
  void WriteHistory();
  bool stopping();  // Stop() came or the run is lost

  MasterNode* node_;
  const MasterOptions& o_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  JobConfig config_;
  std::string dir_;  // the data set's
  dataset::Manifest manifest_;
  TaskQueueOptions qo_;
  security::JobSecret secret_;
  std::shared_ptr<const security::TlsConfig> tls_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string advertise_, address_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::unique_ptr<Election> election_;
  nlohmann::json info_;  // the election value: address, pid, console

  // The console's sources.
  std::mutex nodes_mu_;
  NodeTracker nodes_;  // guarded by nodes_mu_
  struct Rate {
    int64_t time_ms = 0;
    int64_t pushes = 0;
    double per_second = 0;
  };
  std::mutex rates_mu_;
  std::map<int, Rate> rates_;  // guarded by rates_mu_
  CheckpointView checkpoints_;
  std::unique_ptr<ReplicaTracker> replicas_;  // a replicated or elastic job's shards
  ConsoleSources sources_;
  std::unique_ptr<ConsoleServer> console_;

  // While leading.
  std::unique_ptr<StateLog> log_;
  std::unique_ptr<CostSaver> cost_saver_;
  std::unique_ptr<MemberWatch> trainers_, pservers_;
  std::unique_ptr<RunHistoryWriter> history_;
  std::optional<FollowPoll> follow_;
  std::thread ticker_;
};

void MasterNode::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

Status MasterNode::Run() {
  Runtime rt(this);
  TESSERA_RETURN_IF_ERROR(rt.Prepare());
  TESSERA_RETURN_IF_ERROR(rt.Listen());
  TESSERA_RETURN_IF_ERROR(rt.KeepLease());
  TESSERA_RETURN_IF_ERROR(rt.ServeConsole());
  Status end;
  if (!rt.Campaign(&end)) return end;
  SetLogNode("master");
  TESSERA_RETURN_IF_ERROR(rt.Lead());
  leading_ = true;
  rt.Watch();
  rt.StartTicker();
  Status result = rt.Serve();
  leading_ = false;
  rt.Drain(result);
  return result;
}

MasterNode::Runtime::~Runtime() {
  if (ticker_.joinable()) ticker_.join();
}

bool MasterNode::Runtime::stopping() {
  std::lock_guard<std::mutex> lock(node_->mu_);
  return node_->stop_ || !node_->lost_.ok();
}

Status MasterNode::Runtime::Prepare() {
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(o_.etcd));
  TESSERA_ASSIGN_OR_RETURN(config_, LoadJobConfig(etcd_.get(), o_.job));
  dir_ = o_.store + "/" + o_.dataset;
  TESSERA_ASSIGN_OR_RETURN(manifest_, dataset::LoadManifest(dir_));
  if (manifest_.chunks.empty()) return Status::InvalidArgument("data set '" + o_.dataset + "' has no chunks");
  TESSERA_RETURN_IF_ERROR(QueueOptions());
  TESSERA_ASSIGN_OR_RETURN(secret_, LoadJobSecret(etcd_.get(), o_.job, config_, o_.secret_file));
  TESSERA_ASSIGN_OR_RETURN(tls_,
                           LoadJobTls(o_.job, config_, o_.tls_ca_file, o_.tls_cert_file, o_.tls_key_file));
  return Status::OK();
}

// The task queue's options from the flags, the job and the data set.
Status MasterNode::Runtime::QueueOptions() {
  qo_ = o_.queue;
  qo_.chunks = static_cast<int64_t>(manifest_.chunks.size());
  for (const auto& c : manifest_.chunks) qo_.chunk_records.push_back(c.records);
  if (qo_.min_tasks < 0) qo_.min_tasks = std::max(8, 4 * config_.min_trainers);
  // 0: about 4 MiB of records a task (a growing data set's appended chunks are a task each).
  if (qo_.chunks_per_task == 0) {
    std::vector<uint64_t> raw;
    for (const auto& c : manifest_.chunks) raw.push_back(c.raw_bytes > 0 ? c.raw_bytes : c.bytes);
    qo_.chunks_per_task = qo_.follow ? 1 : AutoChunksPerTask(raw, qo_.min_tasks);
  }
  // Idle trainers take the rest of a slow one's task, in parts of a batch or more. Not with
  // consistent checkpoints: their data positions name whole tasks.
  qo_.split_min_records = config_.checkpoint_steps > 0 || !o_.split_tasks || qo_.follow
                              ? 0
                              : std::max<int64_t>(32, qo_.min_task_records);
  if (qo_.follow && config_.checkpoint_steps > 0) {
    return Status::InvalidArgument(
        "a job that follows its data set (--follow) cannot have consistent checkpoints (checkpoint steps)");
  }
  return qo_.Validate();
}

Status MasterNode::Runtime::Listen() {
  service_ = std::make_unique<MasterService>(config_.token, secret_, dir_, manifest_);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(JoinHostPort(o_.host, o_.port), security::GrpcServerCredentials(tls_.get()),
                           &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) return Status::Unavailable("cannot listen on " + JoinHostPort(o_.host, o_.port));
  advertise_ = o_.advertise.empty() ? o_.host : o_.advertise;
  address_ = JoinHostPort(advertise_, port);
  info_ = {{"address", address_}, {"pid", static_cast<int64_t>(::getpid())}, {"started_ms", WallMillis()}};
  return Status::OK();
}

Status MasterNode::Runtime::KeepLease() {
  TESSERA_ASSIGN_OR_RETURN(keeper_, LeaseKeeper::Start(etcd_.get(), {o_.lease_ttl_seconds, {}},
                                                       [this](LeaseState s) { OnLease(s); }));
  election_ = std::make_unique<Election>(etcd_.get(), keys::MasterElectionPrefix(o_.job), keeper_->id());
  return Status::OK();
}

// A lease in doubt or lost stops the service and ends the run.
void MasterNode::Runtime::OnLease(LeaseState s) {
  if (s == LeaseState::kAlive) return;
  service_->Stop(Status::Unavailable(std::string("its lease is ") + LeaseStateName(s)));
  std::lock_guard<std::mutex> lock(node_->mu_);
  if (node_->lost_.ok()) node_->lost_ = Status::Aborted(std::string("lease ") + LeaseStateName(s));
  node_->cv_.notify_all();
}

ConsoleSources MasterNode::Runtime::Sources() {
  ConsoleSources cs;
  cs.job = o_.job;
  cs.config = nlohmann::json::parse(config_.ToJson());
  cs.config.erase("token");
  cs.status = [this]() -> StatusOr<StatusReply> {
    StatusReply reply;
    grpc::Status s = service_->Summary(&reply);
    if (!s.ok()) return Status::Unavailable("this master is not leading (yet): " + s.error_message());
    return reply;
  };
  cs.cost_since = [this](int64_t since) { return service_->CostSince(since); };
  cs.nodes = [this] {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    return nodes_.Nodes();
  };
  replicas_ = std::make_unique<ReplicaTracker>(config_.initial_pservers > 0);
  if (config_.hosted()) cs.replicas = [this] { return replicas_->View(); };
  cs.pserver_extra = [this](int index) { return PserverExtra(index); };
  cs.log_dir = o_.log_dir;
  cs.web_dir = FindConsolePage(o_.web_dir);
  cs.metrics = &service_->metrics();
  cs.before_metrics = [this] { service_->RefreshMetrics(); };
  cs.started_ms = WallMillis();
  return cs;
}

// Per pserver index, for the console: its checkpoint records, its own numbers, its readiness.
nlohmann::json MasterNode::Runtime::PserverExtra(int index) {
  nlohmann::json extra = nlohmann::json::object();
  auto reg = etcd_->Get(keys::Pserver(o_.job, index));
  nlohmann::json info;
  if (reg.ok() && !reg->kvs.empty()) info = nlohmann::json::parse(reg->kvs[0].value, nullptr, false);
  if (!info.is_object()) info = nlohmann::json::object();
  auto ck = etcd_->Get(keys::Checkpoint(o_.job, index));
  if (ck.ok() && !ck->kvs.empty())
    extra["checkpoints"] =
        checkpoints_.Records(o_.job, index, ck->kvs[0].value, info.value("checkpoint_dir", ""));
  if (auto stats = PserverStats(index, info.value("metrics", "")); !stats.is_null()) extra["stats"] = stats;
  auto ready = etcd_->Get(keys::PserverReady(o_.job, index));
  if (ready.ok() && !ready->kvs.empty())
    extra["ready"] = nlohmann::json::parse(ready->kvs[0].value, nullptr, false);
  return extra;
}

nlohmann::json MasterNode::Runtime::PserverStats(int index, const std::string& metrics_url) {
  std::smatch m;
  if (!std::regex_match(metrics_url, m, std::regex("http://([^:/]+):([0-9]+)/metrics"))) return nullptr;
  httplib::Client c(m[1].str(), std::stoi(m[2].str()));
  c.set_connection_timeout(0, 300000);
  c.set_read_timeout(0, 500000);
  auto r = c.Get("/stats");
  auto stats = r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  if (!stats.is_object() || !stats.contains("pushes")) return nullptr;
  std::lock_guard<std::mutex> lock(rates_mu_);
  Rate& rate = rates_[index];
  const int64_t now = WallMillis(), pushes = stats["pushes"].get<int64_t>();
  if (rate.time_ms > 0 && now - rate.time_ms >= 500 && pushes >= rate.pushes)
    rate.per_second = (pushes - rate.pushes) * 1000.0 / static_cast<double>(now - rate.time_ms);
  if (rate.time_ms == 0 || now - rate.time_ms >= 500) {
    rate.time_ms = now;
    rate.pushes = pushes;
  }
  stats["pushes_per_second"] = rate.per_second;
  return stats;
}

// The console binds to loopback unless told otherwise; anywhere else it asks for the job's
// console token (common/http_access.h). It is advertised at the node's address when it binds
// there or everywhere.
Status MasterNode::Runtime::ServeConsole() {
  sources_ = Sources();
  console_ = std::make_unique<ConsoleServer>(sources_);
  if (o_.http_port < 0) return Status::OK();
  const std::string http_host = o_.http_host.empty() ? "127.0.0.1" : o_.http_host;
  TESSERA_ASSIGN_OR_RETURN(auto access, security::HttpAccessFor(http_host, secret_, o_.job));
  const bool open = access->open();
  TESSERA_ASSIGN_OR_RETURN(int http_port, console_->Start(http_host, o_.http_port, std::move(access)));
  info_["console"] = NodeHttp::AdvertisedUrl(http_host, http_port, o_.host, advertise_) + "/";
  spdlog::info("console and /metrics at {}{}", info_["console"].get<std::string>(),
               open ? "" : " (with the job's console token: `tessera status` prints the link)");
  return Status::OK();
}

bool MasterNode::Runtime::Campaign(Status* end) {
  spdlog::info("master at {} campaigning to lead job {} (standby until then)", address_, o_.job);
  Status won = election_->Campaign(info_.dump(), [this] { return stopping(); });
  if (won.ok()) return true;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  keeper_->Stop();
  if (won.code() == StatusCode::kCancelled) {
    std::lock_guard<std::mutex> lock(node_->mu_);
    *end = node_->lost_;
  } else {
    *end = won;
  }
  return false;
}

// Loads (or creates) the queue, replays the log, applies a rollback, and activates the service.
Status MasterNode::Runtime::Lead() {
  const Fence& fence = election_->fence();
  log_ = std::make_unique<StateLog>(etcd_.get(), o_.job, fence, o_.compact_every);
  TESSERA_ASSIGN_OR_RETURN(LeadQueue lead, LoadOrCreateQueue(*log_, o_.job, manifest_, qo_, fence.revision));
  std::unique_ptr<TaskQueue> queue = std::move(lead.queue);
  qo_ = lead.options;
  TESSERA_RETURN_IF_ERROR(
      ApplyRollback(etcd_.get(), o_.job, queue.get(), log_.get(), lead.settings, lead.seq));
  if (qo_.follow) {
    // The chunks a former leader added may be newer than the manifest read at the start.
    TESSERA_ASSIGN_OR_RETURN(dataset::Manifest now, dataset::LoadManifest(dir_));
    TESSERA_RETURN_IF_ERROR(service_->SetChunks(std::move(now.chunks), queue->chunks()));
  }
  cost_saver_ = std::make_unique<CostSaver>(etcd_.get(), o_.job);
  service_->RestoreCost(cost_saver_->Load());
  log_->Start(lead.seq, lead.settings);
  service_->SetEvaluationSaver([this] { cost_saver_->Save(*service_, election_->fence()); });
  if (config_.checkpoint_steps > 0) {
    service_->SetPositionSaver([etcd = etcd_.get(), job = o_.job, fence](const DataPosition& p) {
      return SavePosition(etcd, job, fence, p);
    });
  }
  service_->Activate(std::move(queue), log_.get(), fence.revision);
  return Status::OK();
}

void MasterNode::Runtime::Watch() {
  trainers_ = Registry(etcd_.get(), keys::TrainerPrefix(o_.job)).Watch([this](const MemberList& l) {
    service_->TrainersChanged(l);
    std::lock_guard<std::mutex> lock(nodes_mu_);
    UpdateTrainers(etcd_.get(), o_.job, l, &nodes_);
  });
  service_->TrainersChanged(trainers_->Snapshot());
  pservers_ = Registry(etcd_.get(), keys::PserverPrefix(o_.job)).Watch([this](const MemberList& l) {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    nodes_.Update("pserver", LiveNodes(l), WallMillis(), {}, l.revision);
  });
  if (!o_.history_file.empty()) {
    auto w = RunHistoryWriter::Open(o_.history_file);
    if (w.ok()) {
      history_ = std::move(*w);
      history_->Job(o_.job, sources_.config);
    } else {
      spdlog::warn("no history file: {}", w.status().message());
    }
  }
  if (qo_.follow) follow_.emplace(etcd_.get(), o_.job, dir_, service_.get());
}

// The console's history to the run's file (every 2 s, and when leading ends).
void MasterNode::Runtime::WriteHistory() {
  if (!history_) return;
  history_->Points(service_->CostSince(history_->last_seq()));
  {
    std::lock_guard<std::mutex> nl(nodes_mu_);
    history_->Nodes(nodes_.Nodes(), WallMillis());
  }
  if (auto st = sources_.status(); st.ok()) history_->Status(*st, WallMillis());
}

// Every 2 s: the cost history, the nodes (registrations still in etcd have live leases: that is
// the nodes' heartbeat) and the run's history file.
void MasterNode::Runtime::SaveNodesAndHistory() {
  cost_saver_->Save(*service_, election_->fence());
  if (auto l = Registry(etcd_.get(), keys::PserverPrefix(o_.job)).List(); l.ok()) {
    std::lock_guard<std::mutex> nl(nodes_mu_);
    nodes_.Update("pserver", LiveNodes(*l), WallMillis(), {}, l->revision);
  }
  if (auto l = Registry(etcd_.get(), keys::TrainerPrefix(o_.job)).List(); l.ok()) {
    std::lock_guard<std::mutex> nl(nodes_mu_);
    UpdateTrainers(etcd_.get(), o_.job, *l, &nodes_);
  }
  WriteHistory();
}

void MasterNode::Runtime::Tick(SteadyClock::time_point* next_save, SteadyClock::time_point* next_follow) {
  service_->Tick(SteadyMillis());
  if (follow_ && SteadyClock::now() >= *next_follow) {
    *next_follow = SteadyClock::now() + std::chrono::seconds(1);
    follow_->Poll();
  }
  if (config_.hosted()) replicas_->Poll(etcd_.get(), o_.job, WallMillis());
  if (SteadyClock::now() >= *next_save) {
    *next_save = SteadyClock::now() + std::chrono::seconds(2);
    SaveNodesAndHistory();
  }
  if (Status f = log_->failure(); !f.ok()) {
    service_->Stop(f);
    std::lock_guard<std::mutex> l2(node_->mu_);
    if (node_->lost_.ok()) node_->lost_ = f.code() == StatusCode::kAborted ? f : Status::Aborted(f.message());
    node_->cv_.notify_all();
  }
}

// A tick every 100 ms while leading.
void MasterNode::Runtime::StartTicker() {
  ticker_ = std::thread([this] {
    auto next_save = SteadyClock::now(), next_follow = SteadyClock::now();
    std::unique_lock<std::mutex> lock(node_->mu_);
    while (!node_->stop_ && node_->lost_.ok()) {
      lock.unlock();
      Tick(&next_save, &next_follow);
      lock.lock();
      node_->cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  });
}

Status MasterNode::Runtime::Serve() {
  std::unique_lock<std::mutex> lock(node_->mu_);
  node_->cv_.wait(lock, [&] { return node_->stop_ || !node_->lost_.ok(); });
  return node_->lost_;
}

void MasterNode::Runtime::Drain(const Status& result) {
  ticker_.join();
  cost_saver_->Save(*service_, election_->fence());
  WriteHistory();
  pservers_->Cancel();
  trainers_->Cancel();
  console_->Stop();
  service_->Stop(result.ok() ? Status::Unavailable("master stopped") : result);
  log_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  if (result.ok()) {
    (void)election_->Resign();  // a standby takes over now, not after the lease TTL
    (void)keeper_->Revoke();
    spdlog::info("master stopped");
  } else {
    spdlog::error("master stops leading: {}", result.message());
    keeper_->Stop();
  }
}

}  // namespace tessera::master
