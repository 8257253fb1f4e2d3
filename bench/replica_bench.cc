// replica_bench: what replicas cost a sync job, and what a straggler costs one. The same job (3 `tessera
// pserver` processes, 2 trainers in this process, SGD, a dense model of 1, 4 and 16 MiB) with --replicas 1
// and
// --replicas 2 in the same run: the step time (both trainers push their gradient and pull the
// new parameters) and each trainer's push + pull throughput, and R=2's share of R=1's. With
// replicas every applied step also goes from each shard's primary to its backup before the pulls
// are answered. Then stragglers: 3 trainers computing 20 ms a step, one of them 60 ms, without and
// with one backup trainer (a step closes without the last push), against 3 even trainers. Prints
// Markdown tables; see bench/README.md.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <thread>

#include "bench_etcd.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/random.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "harness/etcd_server.h"
#include "harness/job_probe.h"
#include "harness/subprocess.h"
#include "harness/wait.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/replica_map.h"
#include "tessera/client.h"

namespace tessera::bench {
namespace {

using testing::BuildPath;
using testing::EtcdServer;
using testing::SpawnOptions;
using testing::Subprocess;

struct Figure {
  double step_seconds = 0;
  double bytes_per_second = 0;  // one trainer's push + pull
};

struct Setup {
  int replicas = 1;
  size_t floats = 1 << 18;
  std::vector<double> compute_ms = {0, 0};  // per trainer: the time its step computes (slept)
  int backup_trainers = 0;
  int shards = 3, processes = 3;  // an elastic job when processes < shards
};

// One job as `setup` says: seconds per sync step (trainer 0's) over a model of `floats`.
StatusOr<Figure> Measure(EtcdServer& etcd, etcd::EtcdClient& client, const std::string& dir,
                         const Setup& setup, double seconds) {
  static int jobs = 0;
  const std::string job = "rb" + std::to_string(jobs++);
  const int n = static_cast<int>(setup.compute_ms.size());
  const size_t floats = setup.floats;
  JobConfig cfg;
  cfg.pservers = setup.shards;
  cfg.replicas = setup.replicas;
  if (setup.processes < setup.shards) cfg.initial_pservers = setup.processes;
  cfg.min_trainers = n;
  cfg.backup_trainers = setup.backup_trainers;
  cfg.optimizer = *OptimizerConfig::Parse("sgd:lr=0.0001");
  cfg.token = NewUuid();
  TESSERA_RETURN_IF_ERROR(client.Commit(CreateJobTxn(job, &cfg, security::JobSecret::Generate())).status());
  std::vector<std::unique_ptr<Subprocess>> pservers;
  for (int i = 0; i < setup.processes; ++i) {
    SpawnOptions o;
    o.argv = {
        BuildPath("src/tessera"), "pserver", "--etcd", etcd.endpoint(), "--job", job, "--log-level", "warn"};
    o.log_path = dir + "/" + job + "-ps" + std::to_string(i) + ".log";
    TESSERA_ASSIGN_OR_RETURN(auto p, Subprocess::Spawn(o));
    pservers.push_back(std::move(p));
  }
  Registry reg(&client, keys::PserverPrefix(job));
  if (!testing::WaitUntil(
          [&] {
            auto l = reg.List();
            return l.ok() && static_cast<int>(l->members.size()) == setup.shards;
          },
          std::chrono::seconds(30))) {
    return Status::DeadlineExceeded("pservers did not start");
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<Status> results(n);
  std::vector<double> per_step(n);
  std::vector<std::thread> trainers;
  for (int t = 0; t < n; ++t) {
    trainers.emplace_back([&, t] {
      ClientOptions o;
      o.connection.etcd_endpoints = {etcd.endpoint()};
      o.connection.job = job;
      o.trainer_id = std::to_string(t);
      auto c = Client::Connect(o);
      if (!c.ok()) {
        results[t] = c.status();
        ++ready;
        return;
      }
      std::vector<float> w(floats, 0.5f), g(floats, 0.001f);
      Status s = (*c)->AddDense("w", w.data(), w.size());
      if (s.ok()) s = (*c)->Initialize();
      ++ready;
      while (s.ok() && !go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      auto step = [&] {
        if (setup.compute_ms[t] > 0)
          std::this_thread::sleep_for(
              std::chrono::microseconds(static_cast<int64_t>(setup.compute_ms[t] * 1e3)));
        Gradients grads;
        grads.Dense("w", g);
        grads.samples = 1;
        return (*c)->PushPull(grads).Wait();
      };
      for (int i = 0; i < 3 && s.ok(); ++i) s = step();  // warm-up
      auto start = Now();
      int steps = 0;
      // Trainer 0 measures; the others train until it is done.
      while (s.ok() && (t == 0 ? steps < 10 || std::chrono::duration<double>(Now() - start).count() < seconds
                               : !stop.load())) {
        s = step();
        ++steps;
      }
      per_step[t] = std::chrono::duration<double>(Now() - start).count() / std::max(steps, 1);
      if (t == 0) stop = true;
      results[t] = s;
      (void)(*c)->Close();
    });
  }
  testing::WaitUntil([&] { return ready.load() == n; }, std::chrono::seconds(60));
  if (setup.replicas > 1) {
    // Every shard copied before the clock starts.
    testing::WaitUntil([&] { return testing::FullyReplicated(&client, job); }, std::chrono::seconds(60));
  }
  go = true;
  for (auto& t : trainers) t.join();
  for (auto& p : pservers) p->Terminate(std::chrono::seconds(5));
  for (const auto& r : results) TESSERA_RETURN_IF_ERROR(r);
  Figure f;
  f.step_seconds = per_step[0];
  f.bytes_per_second = 2.0 * static_cast<double>(floats * sizeof(float)) / f.step_seconds;
  return f;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"replica_bench: a sync job's step with --replicas 1 and 2"};
  double seconds = 3;
  bool quick = false;
  app.add_option("--seconds", seconds, "time per measurement")->capture_default_str();
  app.add_flag("--quick", quick, "1 and 4 MiB only");
  CLI11_PARSE(app, argc, argv);
  LogOptions lo;
  lo.level = "warn";
  (void)InitLogging(lo);
  auto etcd = testing::EtcdServer::Launch();
  if (!etcd.ok()) {
    std::fprintf(stderr, "etcd: %s\n", etcd.status().ToString().c_str());
    return 1;
  }
  auto client = bench::EtcdClientOf((*etcd)->endpoint());
  auto dir = MakeTempDir("replica-bench-");
  if (!client.ok() || !dir.ok()) return 1;
  std::printf("Sync job, 3 pservers, 2 trainers, SGD; step = both trainers push and pull the model.\n\n");
  std::printf(
      "| model | R=1 step (ms) | R=2 step (ms) | R=1 GB/s per trainer | R=2 GB/s per trainer | R=2 / R=1 "
      "|\n");
  std::printf("|---|---|---|---|---|---|\n");
  std::vector<int> sizes = quick ? std::vector<int>{1, 4} : std::vector<int>{1, 4, 16};
  int code = 0;
  for (int mib : sizes) {
    const size_t floats = static_cast<size_t>(mib) << 18;
    auto one = bench::Measure(**etcd, **client, *dir, {1, floats}, seconds);
    auto two = bench::Measure(**etcd, **client, *dir, {2, floats}, seconds);
    if (!one.ok() || !two.ok()) {
      std::fprintf(stderr, "%s\n", (!one.ok() ? one.status() : two.status()).ToString().c_str());
      code = 1;
      break;
    }
    std::printf("| %d MiB | %.2f | %.2f | %.2f | %.2f | %.0f%% |\n", mib, one->step_seconds * 1e3,
                two->step_seconds * 1e3, one->bytes_per_second / 1e9, two->bytes_per_second / 1e9,
                100.0 * two->bytes_per_second / one->bytes_per_second);
    std::fflush(stdout);
  }
  if (code == 0) {
    // Stragglers: 3 trainers computing 20 ms a step, one of them 3x slower (60 ms), 1 MiB model.
    std::printf("\nSync job, 3 trainers that compute 20 ms a step, 1 MiB model, 3 pservers:\n\n");
    std::printf("| trainers | backup trainers | step (ms) | cost of the straggler |\n|---|---|---|---|\n");
    auto even = bench::Measure(**etcd, **client, *dir, {1, 1 << 18, {20, 20, 20}, 0}, seconds);
    auto slow = bench::Measure(**etcd, **client, *dir, {1, 1 << 18, {20, 20, 60}, 0}, seconds);
    auto backed = bench::Measure(**etcd, **client, *dir, {1, 1 << 18, {20, 20, 60}, 1}, seconds);
    if (!even.ok() || !slow.ok() || !backed.ok()) {
      std::fprintf(stderr, "%s\n",
                   (!even.ok()   ? even.status()
                    : !slow.ok() ? slow.status()
                                 : backed.status())
                       .ToString()
                       .c_str());
      code = 1;
    } else {
      std::printf("| all at 20 ms | 0 | %.1f | - |\n", even->step_seconds * 1e3);
      std::printf("| one at 60 ms | 0 | %.1f | %+.0f%% |\n", slow->step_seconds * 1e3,
                  100.0 * (slow->step_seconds / even->step_seconds - 1));
      std::printf("| one at 60 ms | 1 | %.1f | %+.0f%% |\n", backed->step_seconds * 1e3,
                  100.0 * (backed->step_seconds / even->step_seconds - 1));
    }
  }
  if (code == 0) {
    // Elastic: the same 4 shards served by 2 or by 4 pserver processes (16 MiB, 2 trainers).
    std::printf("\nSync job of 4 shards, 2 trainers, 16 MiB model, on 2 or 4 pserver processes:\n\n");
    std::printf("| pserver processes | step (ms) | GB/s per trainer |\n|---|---|---|\n");
    for (int processes : {2, 4}) {
      bench::Setup setup;
      setup.floats = size_t{16} << 18;
      setup.shards = 4;
      setup.processes = processes;
      auto f = bench::Measure(**etcd, **client, *dir, setup, seconds);
      if (!f.ok()) {
        std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
        code = 1;
        break;
      }
      std::printf("| %d | %.2f | %.2f |\n", processes, f->step_seconds * 1e3, f->bytes_per_second / 1e9);
    }
  }
  (void)RemoveAll(*dir);
  return code;
}
