// checkpoint_bench: what an incremental checkpoint saves. A pserver's shard with one sparse table
// of --rows rows (dim 8, Adagrad: 16 floats a row) is checkpointed whole, then --changed of its
// rows are pushed and it is checkpointed again as a delta, a few times; each checkpoint is timed
// as the pserver takes it (the copy under the lock, the file written and fsynced, the record put
// in a real etcd; files under $TMPDIR). Then the time to load the base alone and the base with its
// deltas. Prints a Markdown table; see bench/README.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>

#include "bench_etcd.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/delta_policy.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "harness/etcd_server.h"
#include "pserver/shard_store.h"

namespace tessera::bench {
namespace {

constexpr int kDim = 8;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Timed {
  double copy_s = 0, total_s = 0;
  CheckpointRecord rec;
};

// One checkpoint as the pserver takes it: the copy (under its lock there), then Save.
Timed Checkpoint1(ShardStore& store, Checkpointer& ck, int64_t version, bool delta) {
  const auto start = Now();
  Checkpoint c{"bench", 0, version, WallMillis(), store.CheckpointSnapshot(delta)};
  c.gen = store.checkpoint_gen();
  const auto copied = Now();
  auto rec = ck.Save(std::move(c));
  if (!rec.ok()) {
    std::fprintf(stderr, "checkpoint failed: %s\n", rec.status().ToString().c_str());
    std::exit(1);
  }
  return {Seconds(copied - start), Seconds(Now() - start), *rec};
}

// Pushes `keys` (one gradient row each), in requests of 100k rows.
void Push(ShardStore& store, const std::vector<uint64_t>& keys) {
  std::vector<float> grads(100000 * kDim, 0.01f);
  for (size_t i = 0; i < keys.size(); i += 100000) {
    const size_t n = std::min<size_t>(100000, keys.size() - i);
    store.ApplySparse("emb", std::span<const uint64_t>(keys.data() + i, n), grads.data(), 1.0f);
  }
}

int Run(int64_t rows, double changed, int deltas) {
  auto etcd = testing::EtcdServer::Launch();
  if (!etcd.ok()) {
    std::fprintf(stderr, "etcd: %s\n", etcd.status().ToString().c_str());
    return 1;
  }
  auto client = EtcdClientOf((*etcd)->endpoint());
  if (!client.ok() || !(*client)->Put(keys::Pserver("bench", 0), "{}").ok()) return 1;
  const int64_t epoch = (*client)->Get(keys::Pserver("bench", 0))->kvs[0].create_revision;
  auto dir = MakeTempDir("checkpoint-bench-");  // under $TMPDIR
  if (!dir.ok()) {
    std::fprintf(stderr, "%s\n", dir.status().ToString().c_str());
    return 1;
  }

  JobConfig cfg;
  cfg.pservers = 1;
  cfg.slots = 16;
  ShardStore store(0, cfg, SlotMap::RoundRobin(16, 1));
  if (!store.Declare({"emb", true, 0, kDim, *OptimizerConfig::Parse("adagrad:lr=0.1"), {}}).ok()) return 1;
  std::vector<uint64_t> keys(rows);
  std::mt19937_64 rng(7);
  for (auto& k : keys) k = rng();
  auto fill = Now();
  Push(store, keys);
  std::fprintf(stderr, "filled %lld rows in %.1f s\n", static_cast<long long>(rows), Seconds(Now() - fill));

  Checkpointer ck(client->get(), "bench", 0, epoch, *dir);
  std::printf(
      "| checkpoint | rows written | file | copy (under the lock) | total (copy, write, fsync, record) |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  auto row = [](const std::string& what, int64_t n, const Timed& t) {
    std::printf("| %s | %lld | %s | %.3f s | %.3f s |\n", what.c_str(), static_cast<long long>(n),
                HumanBytes(static_cast<double>(t.rec.bytes)).c_str(), t.copy_s, t.total_s);
    std::fflush(stdout);
  };
  Timed whole = Checkpoint1(store, ck, 1, false);
  row("whole", rows, whole);
  const auto n = static_cast<int64_t>(static_cast<double>(rows) * changed);
  std::vector<double> delta_s;
  for (int d = 0; d < deltas; ++d) {
    std::vector<uint64_t> some(n);
    for (auto& k : some) k = keys[rng() % keys.size()];
    std::sort(some.begin(), some.end());
    some.erase(std::unique(some.begin(), some.end()), some.end());
    Push(store, some);
    const CheckpointKindChoice kind =
        ChooseCheckpointKind(ck.chain(), store.checkpoint_gen(), store.DeltaBytes(), DeltaPolicy{});
    Timed t = Checkpoint1(store, ck, 2 + d, kind.delta);
    row(kind.delta ? "delta " + std::to_string(d + 1) : "whole (" + kind.why + ")",
        static_cast<int64_t>(some.size()), t);
    delta_s.push_back(t.total_s);
  }
  std::sort(delta_s.begin(), delta_s.end());
  const double median = delta_s.empty() ? 0 : delta_s[delta_s.size() / 2];
  std::printf(
      "\nA delta of %.1f%% of %lld rows: median %.3f s against %.3f s whole (%.1f%%; goal under 10%%).\n",
      changed * 100, static_cast<long long>(rows), median, whole.total_s, 100 * median / whole.total_s);

  // Recovery: the base with its deltas, against the base alone.
  auto start = Now();
  auto latest = Checkpointer(client->get(), "bench", 0, epoch, *dir).LoadLatest();
  const double chain_s = Seconds(Now() - start);
  start = Now();
  auto base = ReadCheckpoint(CheckpointPath(*dir, "bench", 0, whole.rec.uuid), whole.rec.digest);
  const double base_s = Seconds(Now() - start);
  if (!latest.ok() || !*latest || !base.ok()) return 1;
  std::printf("Loading: the base alone %.2f s; the base and %d deltas applied %.2f s (%zu rows).\n", base_s,
              deltas, chain_s, (*latest)->shard.sparse[0].keys.size());
  (void)RemoveAll(*dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"checkpoint_bench: whole and incremental checkpoints of one sparse table"};
  int64_t rows = 10'000'000;
  double changed = 0.01;
  int deltas = 3;
  app.add_option("--rows", rows, "rows in the table")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1000}, int64_t{1} << 32));
  app.add_option("--changed", changed, "fraction of the rows pushed between checkpoints")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--deltas", deltas, "delta checkpoints after the whole one")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(rows, changed, deltas);
}
