// master_bench: tasks dispatched and finished per second by a master whose every change is
// persisted in etcd, beside raw etcd put throughput measured in the same run with the same
// concurrency; then the end of a pass with one trainer 3x slower than the others, with and
// without splitting its task for the idle ones. Starts its own etcd and `tessera master`. Prints
// Markdown tables.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_etcd.h"
#include "client/master_client.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/random.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "dataset/dataset.h"
#include "harness/etcd_server.h"
#include "harness/subprocess.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "tessera/reader.h"

namespace tessera::bench {
namespace {

using testing::BuildPath;

// Runs `op` from `threads` threads for `seconds`; returns operations per second.
double Throughput(int threads, double seconds, const std::function<bool(int, int64_t)>& op) {
  std::atomic<int64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  auto start = Now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int64_t i = 0; !stop; ++i) {
        if (!op(t, i)) break;
        ++done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  return static_cast<double>(done) / std::chrono::duration<double>(Now() - start).count();
}

// One pass over `store`'s data set "s" (4 tasks of 2000 records) by 4 readers of a fresh job,
// reading batches of 50 records that take `batch_ms[i]` each for reader i (slept). Returns the
// seconds from the master's start to the last reader's end, and the records each read.
StatusOr<std::pair<double, std::vector<int64_t>>> Pass(const testing::EtcdServer& server,
                                                       etcd::EtcdClient* etcd, const std::string& store,
                                                       const std::string& job,
                                                       const std::vector<int>& batch_ms, bool split) {
  JobConfig cfg;
  cfg.token = NewUuid();
  const security::JobSecret secret = security::JobSecret::Generate();
  TESSERA_RETURN_IF_ERROR(etcd->Commit(CreateJobTxn(job, &cfg, secret)).status());
  testing::SpawnOptions so;
  so.argv = {BuildPath("src/tessera"),
             "master",
             "--etcd",
             server.endpoint(),
             "--job",
             job,
             "--store",
             store,
             "--dataset",
             "s",
             "--min-tasks",
             "4",
             "--min-task-records",
             "50",
             "--log-level",
             "warn"};
  if (!split) so.argv.push_back("--no-split-tasks");
  so.log_path = store + "/../" + job + ".log";
  TESSERA_ASSIGN_OR_RETURN(auto master, testing::Subprocess::Spawn(so));
  std::vector<std::unique_ptr<Reader>> readers;
  for (size_t i = 0; i < batch_ms.size(); ++i) {
    ReaderOptions ro;
    ro.connection.etcd_endpoints = {server.endpoint()};
    ro.connection.job = job;
    TESSERA_ASSIGN_OR_RETURN(auto r, Reader::Open(ro));
    readers.push_back(std::move(r));
  }
  master::MasterClient probe(etcd, job, cfg.token, secret);
  TESSERA_RETURN_IF_ERROR(probe.GetStatus(Deadline(std::chrono::seconds(30))).status());
  const auto start = Now();
  std::vector<int64_t> records(batch_ms.size());
  std::vector<Status> errors(batch_ms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < readers.size(); ++i) {
    threads.emplace_back([&, i] {
      std::string rec;
      const auto deadline = Now() + std::chrono::seconds(120);
      while (!readers[i]->finished() && Now() < deadline) {
        auto more = readers[i]->Next(&rec);
        if (!more.ok()) {
          errors[i] = more.status();
          return;
        }
        if (*more && ++records[i] % 50 != 0) continue;
        // A batch (or the end of what we have): "train" it, acknowledge.
        std::this_thread::sleep_for(std::chrono::milliseconds(*more ? batch_ms[i] : 20));
        if (Status s = readers[i]->Trained(); !s.ok()) {
          errors[i] = s;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double took = std::chrono::duration<double>(Now() - start).count();
  master->Terminate(std::chrono::seconds(5));
  for (const auto& e : errors) TESSERA_RETURN_IF_ERROR(e);
  return std::make_pair(took, records);
}

// The bench's etcd and temp directory, shared by its parts.
struct BenchEnv {
  std::string dir;
  std::unique_ptr<testing::EtcdServer> server;
  std::unique_ptr<etcd::EtcdClient> etcd;
};

StatusOr<BenchEnv> StartEnv() {
  BenchEnv env;
  TESSERA_ASSIGN_OR_RETURN(env.dir, MakeTempDir("master-bench-"));
  TESSERA_ASSIGN_OR_RETURN(env.server, testing::EtcdServer::Launch());
  TESSERA_ASSIGN_OR_RETURN(env.etcd, EtcdClientOf(env.server->endpoint()));
  return env;
}

int Stragglers(BenchEnv& env) {
  dataset::WriterOptions wo;
  wo.chunk_bytes = 4 << 20;  // one chunk, cut into 4 tasks of 2000 records
  auto w = dataset::DatasetWriter::Create(env.dir + "/store", "s", "text", "line", wo);
  for (int i = 0; i < 8000; ++i) (void)(*w)->Add("record " + std::to_string(i) + std::string(40, 'x'));
  if (!(*w)->Commit(nlohmann::json::object()).ok()) return 1;
  std::printf(
      "\nOne pass, 4 trainers, 4 tasks of 2000 records, batches of 50 (25 ms each; the slow trainer 75 "
      "ms):\n\n| trainers | split tasks | pass (s) | records read by the slow one |\n|---|---|---|---|\n");
  struct Case {
    const char* name;
    std::vector<int> batch_ms;
    bool split;
  };
  int code = 0, n = 0;
  for (const Case& c :
       {Case{"all at 25 ms", {25, 25, 25, 25}, true}, Case{"one at 75 ms", {75, 25, 25, 25}, false},
        Case{"one at 75 ms", {75, 25, 25, 25}, true}}) {
    auto r = Pass(*env.server, env.etcd.get(), env.dir + "/store", "pass" + std::to_string(n++), c.batch_ms,
                  c.split);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      code = 1;
      break;
    }
    std::printf("| %s | %s | %.2f | %lld |\n", c.name, c.split ? "yes" : "no", r->first,
                static_cast<long long>(r->second[0]));
    std::fflush(stdout);
  }
  return code;
}

int Run(BenchEnv& env, double seconds) {
  const std::string job = "bench";
  JobConfig cfg;
  cfg.token = NewUuid();
  const security::JobSecret secret = security::JobSecret::Generate();  // calls are authenticated, as in a job
  if (!env.etcd->Commit(CreateJobTxn(job, &cfg, secret)).ok()) return 1;
  // A data set of 200,000 tiny chunks: plenty of tasks; the master never reads the part files.
  dataset::WriterOptions wo;
  wo.chunk_bytes = 1024;
  wo.compressor = recordio::Compressor::kNone;
  auto w = dataset::DatasetWriter::Create(env.dir + "/store", "d", "text", "line", wo);
  std::string rec(1100, 'r');
  for (int i = 0; i < 200000; ++i) (void)(*w)->Add(rec);
  if (!(*w)->Commit(nlohmann::json::object()).ok()) return 1;
  testing::SpawnOptions so;
  so.argv = {BuildPath("src/tessera"),
             "master",
             "--etcd",
             env.server->endpoint(),
             "--job",
             job,
             "--store",
             env.dir + "/store",
             "--dataset",
             "d",
             "--passes",
             "100",
             "--log-level",
             "warn"};
  so.log_path = env.dir + "/master.log";
  auto master = testing::Subprocess::Spawn(so);
  if (!master.ok()) return 1;
  master::MasterClient probe(env.etcd.get(), job, cfg.token, secret);
  if (!probe.GetStatus(Deadline(std::chrono::seconds(30))).ok()) return 1;

  std::printf(
      "| clients | tasks/s (dispatch + finish, persisted) | etcd events/s via the master | raw etcd puts/s "
      "|\n");
  std::printf("|---|---|---|---|\n");
  for (int clients : {1, 4, 16}) {
    std::vector<std::unique_ptr<master::MasterClient>> mcs;
    for (int c = 0; c < clients; ++c)
      mcs.push_back(std::make_unique<master::MasterClient>(env.etcd.get(), job, cfg.token, secret));
    double tasks = Throughput(clients, seconds, [&](int t, int64_t) {
      std::string trainer = "t" + std::to_string(t);
      auto task = mcs[t]->GetTask(trainer, Deadline(std::chrono::seconds(30)));
      if (!task.ok() || task->kind() != master::GetTaskReply::TASK) return false;
      return mcs[t]
          ->Finish(trainer, task->task().id(), task->task().epoch(), Deadline(std::chrono::seconds(30)))
          .ok();
    });
    double puts = Throughput(clients, seconds, [&](int t, int64_t i) {
      return env.etcd
          ->Put("/bench/raw/" + std::to_string(t) + "/" + std::to_string(i % 100), std::string(100, 'v'))
          .ok();
    });
    std::printf("| %d | %.0f | %.0f | %.0f |\n", clients, tasks, 2 * tasks, puts);
    std::fflush(stdout);
  }
  (*master)->Terminate(std::chrono::seconds(5));
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"master task-dispatch benchmark"};
  double seconds = 3;
  bool stragglers_only = false;
  app.add_option("--seconds", seconds, "measuring time per figure");
  app.add_flag("--stragglers-only", stragglers_only, "only the pass with a slow trainer");
  CLI11_PARSE(app, argc, argv);
  auto env = tessera::bench::StartEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 1;
  }
  int code = stragglers_only ? 0 : tessera::bench::Run(*env, seconds);
  if (code == 0) code = tessera::bench::Stragglers(*env);
  (void)tessera::RemoveAll(env->dir);
  return code;
}
