// master_bench: tasks dispatched and finished per second by a master whose every change is
// persisted in etcd, beside raw etcd put throughput measured in the same run with the same
// concurrency. Starts its own etcd and `tessera master`. Prints a Markdown table.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

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

int Run(double seconds) {
  auto dir = MakeTempDir("master-bench-");
  auto etcd_server = testing::EtcdServer::Launch();
  if (!dir.ok() || !etcd_server.ok()) return 1;
  etcd::EtcdOptions eo;
  eo.endpoints = {(*etcd_server)->endpoint()};
  auto etcd = std::move(*etcd::EtcdClient::Create(eo));
  const std::string job = "bench";
  JobConfig cfg;
  cfg.token = NewUuid();
  const security::JobSecret secret = security::JobSecret::Generate();  // calls are authenticated, as in a job
  if (!etcd->Commit(CreateJobTxn(job, &cfg, secret)).ok()) return 1;
  // A data set of 200,000 tiny chunks: plenty of tasks; the master never reads the part files.
  dataset::WriterOptions wo;
  wo.chunk_bytes = 1024;
  wo.compressor = recordio::Compressor::kNone;
  auto w = dataset::DatasetWriter::Create(*dir + "/store", "d", "text", "line", wo);
  std::string rec(1100, 'r');
  for (int i = 0; i < 200000; ++i) (void)(*w)->Add(rec);
  if (!(*w)->Commit(nlohmann::json::object()).ok()) return 1;
  testing::SpawnOptions so;
  so.argv = {BuildPath("src/tessera"),
             "master",
             "--etcd",
             (*etcd_server)->endpoint(),
             "--job",
             job,
             "--store",
             *dir + "/store",
             "--dataset",
             "d",
             "--passes",
             "100",
             "--log-level",
             "warn"};
  so.log_path = *dir + "/master.log";
  auto master = testing::Subprocess::Spawn(so);
  if (!master.ok()) return 1;
  master::MasterClient probe(etcd.get(), job, cfg.token, secret);
  if (!probe.GetStatus(Deadline(std::chrono::seconds(30))).ok()) return 1;

  std::printf(
      "| clients | tasks/s (dispatch + finish, persisted) | etcd events/s via the master | raw etcd puts/s "
      "|\n");
  std::printf("|---|---|---|---|\n");
  for (int clients : {1, 4, 16}) {
    std::vector<std::unique_ptr<master::MasterClient>> mcs;
    for (int c = 0; c < clients; ++c)
      mcs.push_back(std::make_unique<master::MasterClient>(etcd.get(), job, cfg.token, secret));
    double tasks = Throughput(clients, seconds, [&](int t, int64_t) {
      std::string trainer = "t" + std::to_string(t);
      auto task = mcs[t]->GetTask(trainer, Deadline(std::chrono::seconds(30)));
      if (!task.ok() || task->kind() != master::GetTaskReply::TASK) return false;
      return mcs[t]
          ->Finish(trainer, task->task().id(), task->task().epoch(), Deadline(std::chrono::seconds(30)))
          .ok();
    });
    double puts = Throughput(clients, seconds, [&](int t, int64_t i) {
      return etcd
          ->Put("/bench/raw/" + std::to_string(t) + "/" + std::to_string(i % 100), std::string(100, 'v'))
          .ok();
    });
    std::printf("| %d | %.0f | %.0f | %.0f |\n", clients, tasks, 2 * tasks, puts);
    std::fflush(stdout);
  }
  (*master)->Terminate(std::chrono::seconds(5));
  (void)RemoveAll(*dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"master task-dispatch benchmark"};
  double seconds = 3;
  app.add_option("--seconds", seconds, "measuring time per figure");
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(seconds);
}
