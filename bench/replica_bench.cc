// replica_bench: what replicas cost a sync job. The same job (3 `tessera pserver` processes, 2
// trainers in this process, SGD, a dense model of 1, 4 and 16 MiB) with --replicas 1 and
// --replicas 2 in the same run: the step time (both trainers push their gradient and pull the
// new parameters) and each trainer's push + pull throughput, and R=2's share of R=1's. With
// replicas every applied step also goes from each shard's primary to its backup before the pulls
// are answered. Prints a Markdown table; see bench/README.md.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <thread>

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

// One job with `replicas` copies: seconds per sync step of two trainers over a model of `floats`.
StatusOr<Figure> Measure(EtcdServer& etcd, etcd::EtcdClient& client, const std::string& dir, int replicas,
                         size_t floats, double seconds) {
  static int jobs = 0;
  const std::string job = "rb" + std::to_string(jobs++);
  JobConfig cfg;
  cfg.pservers = 3;
  cfg.replicas = replicas;
  cfg.min_trainers = 2;
  cfg.optimizer = *OptimizerConfig::Parse("sgd:lr=0.0001");
  cfg.token = NewUuid();
  TESSERA_RETURN_IF_ERROR(client.Commit(CreateJobTxn(job, &cfg, security::JobSecret::Generate())).status());
  std::vector<std::unique_ptr<Subprocess>> pservers;
  for (int i = 0; i < 3; ++i) {
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
            return l.ok() && l->members.size() == 3;
          },
          std::chrono::seconds(30))) {
    return Status::DeadlineExceeded("pservers did not start");
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Status> results(2);
  std::vector<double> per_step(2);
  std::vector<std::thread> trainers;
  for (int t = 0; t < 2; ++t) {
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
        Gradients grads;
        grads.Dense("w", g);
        grads.samples = 1;
        return (*c)->PushPull(grads).Wait();
      };
      for (int i = 0; i < 3 && s.ok(); ++i) s = step();  // warm-up
      auto start = Now();
      int steps = 0;
      while (s.ok() && (steps < 10 || std::chrono::duration<double>(Now() - start).count() < seconds)) {
        s = step();
        ++steps;
      }
      per_step[t] = std::chrono::duration<double>(Now() - start).count() / steps;
      results[t] = s;
      (void)(*c)->Close();
    });
  }
  testing::WaitUntil([&] { return ready.load() == 2; }, std::chrono::seconds(60));
  if (replicas > 1) {
    // Every shard copied before the clock starts.
    testing::WaitUntil([&] { return testing::FullyReplicated(&client, job); }, std::chrono::seconds(60));
  }
  go = true;
  for (auto& t : trainers) t.join();
  for (auto& p : pservers) p->Terminate(std::chrono::seconds(5));
  for (const auto& r : results) TESSERA_RETURN_IF_ERROR(r);
  Figure f;
  f.step_seconds = std::max(per_step[0], per_step[1]);
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
  etcd::EtcdOptions eo;
  eo.endpoints = {(*etcd)->endpoint()};
  auto client = etcd::EtcdClient::Create(eo);
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
    auto one = bench::Measure(**etcd, **client, *dir, 1, floats, seconds);
    auto two = bench::Measure(**etcd, **client, *dir, 2, floats, seconds);
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
  (void)RemoveAll(*dir);
  return code;
}
