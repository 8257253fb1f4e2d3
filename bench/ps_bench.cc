// ps_bench: data-plane throughput of Tessera's pservers through the trainer client, beside the
// loopback TCP bandwidth measured in the same run (iperf3 -l 1M). Starts its own etcd and
// `tessera pserver` processes. Prints a Markdown table; see bench/README.md.
//
//   dense:  push and pull of a whole model (1, 4, 16, 64 MiB) with 1 and 2 pservers, async
//           mode (no barrier in the way), GB/s of parameter bytes and % of iperf3.
//   sparse: rows per second pulled and pushed for dim 8 and 64, 10,000 keys per request drawn
//           from a Zipf(1.1) distribution over a million keys.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/clock.h"
#include "common/files.h"
#include "common/random.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "harness/etcd_server.h"
#include "harness/subprocess.h"
#include "harness/wait.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "loopback.h"
#include "tessera/client.h"

namespace tessera::bench {
namespace {

using testing::BuildPath;
using testing::EtcdServer;
using testing::SpawnOptions;
using testing::Subprocess;

struct Cluster {
  std::unique_ptr<EtcdServer> etcd;
  std::unique_ptr<etcd::EtcdClient> client;
  std::vector<std::unique_ptr<Subprocess>> pservers;
  std::string dir;
  int jobs = 0;
};

StatusOr<std::string> StartJob(Cluster& c, int pservers, const std::string& mode) {
  std::string job = "bench" + std::to_string(c.jobs++);
  JobConfig cfg;
  cfg.pservers = pservers;
  cfg.mode = *ConsistencyMode::Parse(mode);
  cfg.optimizer = *OptimizerConfig::Parse("sgd:lr=0.0001");
  cfg.token = NewUuid();
  etcd::Txn txn;
  txn.success.push_back(etcd::Op::Put(keys::Config(job), cfg.ToJson()));
  txn.success.push_back(etcd::Op::Put(keys::SlotMap(job), SlotMap::RoundRobin(cfg.slots, pservers).ToJson()));
  TESSERA_RETURN_IF_ERROR(c.client->Commit(txn).status());
  for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
  c.pservers.clear();
  for (int i = 0; i < pservers; ++i) {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera"),
              "pserver",
              "--etcd",
              c.etcd->endpoint(),
              "--job",
              job,
              "--log-level",
              "warn"};
    o.log_path = c.dir + "/" + job + "-ps" + std::to_string(i) + ".log";
    TESSERA_ASSIGN_OR_RETURN(auto p, Subprocess::Spawn(o));
    c.pservers.push_back(std::move(p));
  }
  Registry reg(c.client.get(), keys::PserverPrefix(job));
  if (!testing::WaitUntil(
          [&] {
            auto l = reg.List();
            return l.ok() && static_cast<int>(l->members.size()) == pservers;
          },
          std::chrono::seconds(30))) {
    return Status::DeadlineExceeded("pservers did not start");
  }
  return job;
}

StatusOr<std::unique_ptr<Client>> Connect(Cluster& c, const std::string& job) {
  ClientOptions o;
  o.etcd_endpoints = {c.etcd->endpoint()};
  o.job = job;
  return Client::Connect(o);
}

// Runs `op` until at least `min_seconds` and `min_iters` have passed; returns seconds per op.
template <typename Fn>
StatusOr<double> Time(Fn op, double min_seconds, int min_iters) {
  TESSERA_RETURN_IF_ERROR(op());  // warm-up
  auto start = Now();
  int iters = 0;
  double elapsed = 0;
  while (iters < min_iters || elapsed < min_seconds) {
    TESSERA_RETURN_IF_ERROR(op());
    ++iters;
    elapsed = std::chrono::duration<double>(Now() - start).count();
  }
  return elapsed / iters;
}

class Zipf {
 public:
  Zipf(uint64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (uint64_t k = 0; k < n; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), s);
      cdf_[k] = sum;
    }
    for (auto& v : cdf_) v /= sum;
  }
  uint64_t operator()(std::mt19937_64& rng) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

int Run(double seconds, bool quick) {
  Cluster c;
  auto dir = MakeTempDir("ps-bench-");
  if (!dir.ok()) return 1;
  c.dir = *dir;
  auto e = EtcdServer::Launch();
  if (!e.ok()) {
    std::fprintf(stderr, "etcd: %s\n", e.status().ToString().c_str());
    return 1;
  }
  c.etcd = std::move(*e);
  etcd::EtcdOptions eo;
  eo.endpoints = {c.etcd->endpoint()};
  c.client = std::move(*etcd::EtcdClient::Create(eo));

  auto iperf = MeasureIperf3(seconds);
  if (!iperf.ok()) {
    std::fprintf(stderr, "iperf3: %s\n", iperf.status().ToString().c_str());
    return 1;
  }
  const double limit = *iperf;
  std::printf("loopback TCP (iperf3 -l 1M, 127.0.0.1): %.2f GB/s\n\n", limit / 1e9);
  std::printf(
      "| transport | model | pservers | push GB/s | push %% of iperf3 | pull GB/s | pull %% of iperf3 |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::vector<int> sizes_mib = quick ? std::vector<int>{1, 4} : std::vector<int>{1, 4, 16, 64};
  for (int pservers : {1, 2}) {
    for (int mib : sizes_mib) {
      auto job = StartJob(c, pservers, "async");
      if (!job.ok()) {
        std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
        return 1;
      }
      auto client = Connect(c, *job);
      if (!client.ok()) return 1;
      size_t n = static_cast<size_t>(mib) << 18;  // floats
      std::vector<float> w(n, 0.5f), g(n, 0.001f);
      (void)(*client)->AddDense("w", w.data(), n);
      if (!(*client)->Initialize().ok()) return 1;
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = 1;
      auto push = Time([&] { return (*client)->Push(grads).Wait(); }, seconds, 3);
      auto pull = Time([&] { return (*client)->Pull().Wait(); }, seconds, 3);
      if (!push.ok() || !pull.ok()) {
        std::fprintf(stderr, "%s %s\n", push.status().ToString().c_str(), pull.status().ToString().c_str());
        return 1;
      }
      double bytes = static_cast<double>(n) * 4;
      double pu = bytes / *push, pl = bytes / *pull;
      std::printf("| grpc | %d MiB | %d | %.2f | %.0f%% | %.2f | %.0f%% |\n", mib, pservers, pu / 1e9,
                  100 * pu / limit, pl / 1e9, 100 * pl / limit);
      std::fflush(stdout);
    }
  }
  std::printf("\n| transport | table dim | pservers | keys/request | pull rows/s | push rows/s |\n");
  std::printf("|---|---|---|---|---|---|\n");
  Zipf zipf(1000000, 1.1);
  std::mt19937_64 rng(7);
  for (int dim : {8, 64}) {
    auto job = StartJob(c, 2, "async");
    if (!job.ok()) return 1;
    auto client = Connect(c, *job);
    if (!client.ok()) return 1;
    (void)(*client)->AddSparse("emb", dim, *InitializerConfig::Parse("uniform:-0.01,0.01"));
    if (!(*client)->Initialize().ok()) return 1;
    const size_t kKeys = 10000;
    std::vector<uint64_t> keys(kKeys);
    std::vector<float> rows(kKeys * dim), grads(kKeys * dim, 0.01f);
    auto pull = Time(
        [&] {
          for (auto& k : keys) k = zipf(rng);
          return (*client)->SparsePull("emb", keys, rows.data()).Wait();
        },
        seconds, 5);
    auto push = Time(
        [&] {
          for (auto& k : keys) k = zipf(rng);
          Gradients g;
          g.Sparse("emb", keys, grads);
          g.samples = 1;
          return (*client)->Push(g).Wait();
        },
        seconds, 5);
    if (!pull.ok() || !push.ok()) return 1;
    std::printf("| grpc | %d | 2 | %zu (Zipf 1.1 over 1M) | %.0f | %.0f |\n", dim, kKeys, kKeys / *pull,
                kKeys / *push);
    std::fflush(stdout);
  }
  for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
  (void)RemoveAll(c.dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"Tessera data-plane benchmark"};
  double seconds = 2.0;
  bool quick = false;
  app.add_option("--seconds", seconds, "minimum measuring time per figure");
  app.add_flag("--quick", quick, "only the small models (a smoke run)");
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(seconds, quick);
}
