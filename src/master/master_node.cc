// MasterNode (see master_node.h).
#include "master/master_node.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "common/digest.h"
#include "common/logging.h"
#include "coord/election.h"
#include "coord/keys.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "dataset/dataset.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "master/master_service.h"
#include "master/state_log.h"

namespace tessera::master {
namespace {

// What a saved state belongs to; a master refuses to continue another data set's queue.
nlohmann::json Settings(const dataset::Manifest& m, const TaskQueueOptions& q) {
  return {{"dataset", m.name},
          {"chunks", q.chunks},
          {"chunks_per_task", q.chunks_per_task},
          {"timeout_ms", q.timeout_ms},
          {"max_failures", q.max_failures},
          {"passes", q.passes},
          {"seed", q.seed},
          {"created_ms", m.created_ms}};
}

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
  TESSERA_RETURN_IF_ERROR(qo.Validate());

  MasterService service(config.token, dir, manifest);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.host + ":" + std::to_string(options_.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) {
    return Status::Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  const std::string address = options_.host + ":" + std::to_string(port);

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
  auto loaded = log.Load();
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<TaskQueue> queue;
  int64_t seq = 0;
  std::string settings = Settings(manifest, qo).dump();
  if (loaded->has_value()) {
    const LoadedState& st = **loaded;
    auto saved = nlohmann::json::parse(st.settings, nullptr, false);
    if (saved.is_discarded() || saved.value("dataset", "") != manifest.name ||
        saved.value("chunks", int64_t{-1}) != qo.chunks ||
        saved.value("created_ms", int64_t{-1}) != manifest.created_ms) {
      return Status::FailedPrecondition("job '" + job + "' already has a task queue for another data set (" +
                                        st.settings +
                                        "); run another job or delete it with `tessera job delete`");
    }
    qo.chunks_per_task = saved.value("chunks_per_task", qo.chunks_per_task);
    qo.timeout_ms = saved.value("timeout_ms", qo.timeout_ms);
    qo.max_failures = saved.value("max_failures", qo.max_failures);
    qo.passes = saved.value("passes", qo.passes);
    qo.seed = saved.value("seed", qo.seed);
    settings = Settings(manifest, qo).dump();
    auto restored = TaskQueue::Restore(qo, st.snapshot);
    if (!restored.ok()) return restored.status();
    queue = std::make_unique<TaskQueue>(std::move(*restored));
    int64_t now = SteadyMillis();
    size_t events = 0;
    for (const auto& d : st.deltas) {
      TESSERA_ASSIGN_OR_RETURN(auto evs, DecodeDelta(d));
      for (const auto& e : evs) TESSERA_RETURN_IF_ERROR(Replay(*queue, e, now));
      events += evs.size();
    }
    queue->ResetDeadlines(now);
    seq = st.seq;
    spdlog::info("took over job {} at revision {}: pass {}/{}, {} events replayed", job,
                 election.fence().revision, queue->pass() + 1, queue->passes(), events);
  } else {
    queue = std::make_unique<TaskQueue>(qo);
    TESSERA_RETURN_IF_ERROR(log.WriteBase(settings, queue->Snapshot(), 0));
    spdlog::info("leading job {}: {} tasks of {} chunks from {} ({} passes)", job, queue->tasks(),
                 qo.chunks_per_task, manifest.name, qo.passes);
  }
  TESSERA_RETURN_IF_ERROR(ApplyRollback(etcd.get(), job, queue.get(), &log, settings, seq));
  log.Start(seq, settings);
  if (config.checkpoint_steps > 0) {
    service.SetPositionSaver([&etcd, &job, fence = election.fence()](const DataPosition& p) {
      return SavePosition(etcd.get(), job, fence, p);
    });
  }
  service.Activate(std::move(queue), &log, election.fence().revision);
  leading_ = true;

  auto trainers = Registry(etcd.get(), keys::TrainerPrefix(job)).Watch([&](const MemberList& l) {
    service.TrainersChanged(l);
  });
  service.TrainersChanged(trainers->Snapshot());
  std::thread ticker([&] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_ && lost_.ok()) {
      lock.unlock();
      service.Tick(SteadyMillis());
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
  trainers->Cancel();
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
