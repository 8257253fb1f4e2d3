// sparse_store_bench: the pserver's sparse-row lookups alone, in one process, with no network:
// rows/s pulled (find or create the row, copy it out) and pushed (find or create, apply SGD) for
// Zipf(1.1) keys (hashed feature ids) over 1M and 10M ids, dim 8 and 64, through
//  - a plain std::unordered_map<key, row> over a row arena (the baseline any server needs),
//  - abseil's flat_hash_map (open addressing) over the same arena,
//  - ShardStore, the pserver's own table (what it uses now), on one thread and with each request's
//    rows shared by --threads threads (ShardStore::SetPool),
// and the bytes the two maps keep per row (row values plus their buckets). Prints a Markdown table; see
// bench/README.md.
#include <absl/container/flat_hash_map.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/hash.h"
#include "common/metrics.h"
#include "common/work_pool.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "pserver/shard_store.h"
#include "zipf.h"

namespace tessera::bench {
namespace {

// What a map holds in memory: libstdc++'s nodes (next pointer, the pair, the cached hash) and
// bucket array; abseil's slots (the pair) and one control byte each.
using Entry = std::pair<const uint64_t, uint32_t>;
size_t MapBytes(const std::unordered_map<uint64_t, uint32_t>& m) {
  return m.size() * (sizeof(void*) + sizeof(Entry) + sizeof(size_t)) + m.bucket_count() * sizeof(void*);
}
size_t MapBytes(const absl::flat_hash_map<uint64_t, uint32_t>& m) {
  return m.capacity() * (sizeof(Entry) + 1);
}

// A table of rows of `dim` floats behind a map from key to row number.
template <typename Map>
struct Table {
  explicit Table(int dim) : dim(dim) {}
  float* Row(uint64_t key) {
    auto [it, inserted] = rows.try_emplace(key, static_cast<uint32_t>(rows.size()));
    if (inserted) arena.resize(arena.size() + dim, 0.01f);
    return arena.data() + static_cast<size_t>(it->second) * dim;
  }
  size_t Bytes() const { return arena.capacity() * sizeof(float) + MapBytes(rows); }
  int dim;
  Map rows;
  std::vector<float> arena;
};

// Rows per second of `op` over every key, in batches of 10,000 (as requests carry them).
template <typename Op>
double RowsPerSecond(const std::vector<uint64_t>& keys, Op op) {
  const auto start = Now();
  for (size_t i = 0; i < keys.size(); i += 10000)
    op(std::span<const uint64_t>(keys).subspan(i, std::min<size_t>(10000, keys.size() - i)));
  return static_cast<double>(keys.size()) / std::chrono::duration<double>(Now() - start).count();
}

// Rows per second: pull (rows made on first touch), push, pull again (every row exists).
struct Rates {
  double pull = 0, push = 0, pull_again = 0;
};

template <typename Map>
Rates MeasureMap(const std::vector<uint64_t>& keys, int dim, size_t* bytes) {
  Table<Map> t(dim);
  std::vector<float> out(10000 * static_cast<size_t>(dim)), grads(out.size(), 0.001f);
  auto pull_op = [&](std::span<const uint64_t> batch) {
    for (size_t i = 0; i < batch.size(); ++i) {
      const float* row = t.Row(batch[i]);
      std::copy(row, row + dim, out.data() + i * dim);
    }
  };
  const double pull = RowsPerSecond(keys, pull_op);
  const double push = RowsPerSecond(keys, [&](std::span<const uint64_t> batch) {
    for (size_t i = 0; i < batch.size(); ++i) {
      float* row = t.Row(batch[i]);
      const float* g = grads.data() + i * dim;
      for (int j = 0; j < dim; ++j) row[j] -= 0.1f * g[j];
    }
  });
  const double again = RowsPerSecond(keys, pull_op);
  *bytes = t.Bytes() / std::max<size_t>(1, t.rows.size());
  return {pull, push, again};
}

// A one-pserver ShardStore holding sparse table "emb" of `dim` with `optimizer`.
std::unique_ptr<ShardStore> StoreWithTable(int dim, const char* optimizer) {
  JobConfig job;
  job.pservers = 1;
  auto store = std::make_unique<ShardStore>(0, job, SlotMap::RoundRobin(job.slots, 1));
  ParamDecl d;
  d.name = "emb";
  d.sparse = true;
  d.dim = dim;
  d.optimizer = *OptimizerConfig::Parse(optimizer);
  d.init = *InitializerConfig::Parse("uniform:-0.01,0.01");
  if (!store->Declare(d).ok()) std::abort();
  return store;
}

Rates MeasureStore(const std::vector<uint64_t>& keys, int dim, size_t* bytes, int threads = 1) {
  auto owned = StoreWithTable(dim, "sgd:lr=0.1");
  ShardStore& store = *owned;
  WorkPool pool(threads);
  store.SetPool(&pool);
  std::vector<float> out(10000 * static_cast<size_t>(dim)), grads(out.size(), 0.001f);
  auto pull_op = [&](std::span<const uint64_t> batch) { store.ReadSparse("emb", batch, out.data()); };
  const double pull = RowsPerSecond(keys, pull_op);
  const double push = RowsPerSecond(
      keys, [&](std::span<const uint64_t> batch) { store.ApplySparse("emb", batch, grads.data(), 1.0f); });
  const double again = RowsPerSecond(keys, pull_op);
  *bytes = static_cast<size_t>(store.Stats()[0].bytes) / std::max<int64_t>(1, store.Stats()[0].elements);
  return {pull, push, again};
}

// Bytes per row of a ShardStore table of `rows` distinct rows (dim 8 or 64, Adagrad: values and one
// state array), as the store counts them and as the process's resident memory grows, beside the
// raw key + values + state.
void BytesPerRow(int64_t rows) {
  std::printf(
      "\n| rows | dim | optimizer | raw bytes (key + values + state) | ShardStore counts | "
      "resident memory grew | ratio to raw |\n|---|---|---|---|---|---|---|\n");
  for (int dim : {8, 64}) {
    const double before = metrics::ReadProcessMemory().resident_bytes;
    auto store = StoreWithTable(dim, "adagrad:lr=0.1");
    std::vector<uint64_t> keys(10000);
    std::vector<float> grads(keys.size() * dim, 0.001f);
    for (int64_t i = 0; i < rows; i += static_cast<int64_t>(keys.size())) {
      for (size_t j = 0; j < keys.size(); ++j) keys[j] = Mix64(static_cast<uint64_t>(i) + j);
      store->ApplySparse("emb", keys, grads.data(), 1.0f);
    }
    const double grew = metrics::ReadProcessMemory().resident_bytes - before;
    const auto st = store->Stats()[0];
    const double raw = 8.0 + 2.0 * dim * 4;
    std::printf("| %lld | %d | adagrad | %.0f | %.1f | %.1f | %.2fx |\n", static_cast<long long>(st.elements),
                dim, raw, static_cast<double>(st.bytes) / st.elements, grew / st.elements,
                grew / st.elements / raw);
    std::fflush(stdout);
  }
}

int Run(size_t count, bool quick, int threads) {
  std::printf(
      "| ids (Zipf 1.1) | dim | table | pull M rows/s | push (SGD) M rows/s | pull again (rows exist) M "
      "rows/s | bytes per row (rows + map) |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (uint64_t ids : quick ? std::vector<uint64_t>{1000000} : std::vector<uint64_t>{1000000, 10000000}) {
    const auto keys = ZipfKeys(ids, 1.1, count, 7);
    for (int dim : {8, 64}) {
      size_t b1 = 0, b2 = 0, b3 = 0, b4 = 0;
      auto std_map = MeasureMap<std::unordered_map<uint64_t, uint32_t>>(keys, dim, &b1);
      auto flat = MeasureMap<absl::flat_hash_map<uint64_t, uint32_t>>(keys, dim, &b2);
      auto store = MeasureStore(keys, dim, &b3);
      auto split = MeasureStore(keys, dim, &b4, threads);
      auto line = [&](const char* name, Rates r, size_t bytes) {
        std::printf("| %llu | %d | %s | %.2f | %.2f | %.2f | %s |\n", static_cast<unsigned long long>(ids),
                    dim, name, r.pull / 1e6, r.push / 1e6, r.pull_again / 1e6,
                    bytes ? std::to_string(bytes).c_str() : "-");
      };
      line("std::unordered_map", std_map, b1);
      line("absl::flat_hash_map", flat, b2);
      line("ShardStore (the pserver's)", store, b3);
      const std::string name = "ShardStore, " + std::to_string(threads) + " threads";
      line(name.c_str(), split, b4);
      std::fflush(stdout);
    }
  }
  BytesPerRow(quick ? 1000000 : 10000000);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"sparse row lookup benchmark"};
  size_t count = 4000000;
  bool quick = false;
  int threads = 2;
  app.add_option("--keys", count, "keys looked up per figure");
  app.add_option("--threads", threads, "threads sharing a request in the last ShardStore row")
      ->check(CLI::Range(1, 64));
  app.add_flag("--quick", quick, "1M ids only");
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(count, quick, threads);
}
