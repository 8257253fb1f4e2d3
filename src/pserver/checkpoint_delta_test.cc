// Incremental checkpoints at the store level: a delta holds exactly the rows changed and the keys
// dropped since the copy before it, and a base with its deltas applied restores the very shard
// that was copied, through random pushes, new rows, evictions and budgets, over many rounds.
#include "checkpoint/checkpoint_delta.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "checkpoint/checkpoint_file.h"

namespace tessera {
namespace {

JobConfig DeltaJob() {
  JobConfig j;
  j.pservers = 1;
  j.slots = 16;
  j.block_size = 64;
  return j;
}

ParamDecl Sparse(const std::string& name, const std::string& opt, int dim, const std::string& limits = "") {
  ParamDecl d{
      name, true, 0, dim, *OptimizerConfig::Parse(opt), *InitializerConfig::Parse("uniform:-1,1,seed=3")};
  d.limits = *TableLimits::Parse(limits);
  return d;
}

// Three tables (plain adagrad; adam with eviction; sgd within a budget) and a dense parameter.
std::unique_ptr<ShardStore> NewStore() {
  auto s = std::make_unique<ShardStore>(0, DeltaJob(), SlotMap::RoundRobin(16, 1));
  EXPECT_TRUE(s->Declare({"w", false, 200, 0, *OptimizerConfig::Parse("sgd:lr=0.1"), {}}).ok());
  EXPECT_TRUE(s->Declare(Sparse("plain", "adagrad:lr=0.1", 4)).ok());
  EXPECT_TRUE(s->Declare(Sparse("aged", "adam:lr=0.01", 3, "evict_after=40")).ok());
  EXPECT_TRUE(s->Declare(Sparse("small", "sgd:lr=1", 2, "budget=4KiB")).ok());
  return s;
}

int Dim(const std::string& table) { return table == "plain" ? 4 : table == "aged" ? 3 : 2; }

// Random pushes of `n` keys from [0, range) to every table, and pulls of some new keys (which
// create rows in the table without limits).
void Train(ShardStore* s, std::mt19937_64& rng, int n, uint64_t range) {
  std::uniform_int_distribution<uint64_t> key(0, range - 1);
  std::uniform_real_distribution<float> g(-1, 1);
  for (const std::string table : {"plain", "aged", "small"}) {
    std::vector<uint64_t> keys(n);
    for (auto& k : keys) k = key(rng);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<float> grads(keys.size() * Dim(table));
    for (auto& x : grads) x = g(rng);
    s->ApplySparse(table, keys, grads.data(), 1.0f);
  }
  std::vector<float> dense(64, 0.5f);
  s->ApplyDense("w", 0, dense.data(), 1.0f);
  std::vector<uint64_t> pulled = {range + rng() % 1000};
  std::vector<float> out(4);
  s->ReadSparse("plain", pulled, out.data());
}

Status ApplyDelta(ShardSnapshot* base, const ShardSnapshot& delta) {
  return ApplyDeltas(base, std::span<const ShardSnapshot>(&delta, 1));
}

// The snapshot with every table's rows in key order (row order is not part of the state).
ShardSnapshot Canonical(ShardSnapshot snap) {
  for (auto& t : snap.sparse) {
    const size_t n = t.keys.size(), stride = n ? t.arena.size() / n : 0;
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.keys[a] < t.keys[b]; });
    ShardSnapshot::SparseTable c = t;
    for (size_t i = 0; i < n; ++i) {
      const size_t r = order[i];
      c.keys[i] = t.keys[r];
      std::copy_n(t.arena.begin() + r * stride, stride, c.arena.begin() + i * stride);
      if (!t.t.empty()) c.t[i] = t.t[r];
      if (!t.last.empty()) c.last[i] = t.last[r];
    }
    t = std::move(c);
  }
  return snap;
}

TEST(CheckpointDeltaTest, ADeltaHoldsExactlyTheChangedRowsAndTheDroppedKeys) {
  auto s = NewStore();
  std::mt19937_64 rng(1);
  for (int i = 0; i < 5; ++i) Train(s.get(), rng, 50, 500);
  ShardSnapshot base = s->CheckpointSnapshot(false);
  EXPECT_FALSE(base.delta);
  const int64_t gen = s->checkpoint_gen();
  // Nothing changed: the delta has no rows, but whole dense blocks and the tables' bookkeeping.
  ShardSnapshot empty = s->CheckpointSnapshot(true);
  EXPECT_EQ(s->checkpoint_gen(), gen + 1);
  ASSERT_TRUE(empty.delta);
  EXPECT_EQ(empty.dense, base.dense);
  for (const auto& t : empty.sparse) {
    EXPECT_TRUE(t.keys.empty()) << t.param;
    EXPECT_TRUE(t.removed.empty()) << t.param;
  }
  // Push two known rows of "plain" (one new): the delta has those two, in full.
  std::vector<uint64_t> keys = {3, 100000};
  std::vector<float> grads(8, 0.25f);
  s->ApplySparse("plain", keys, grads.data(), 1.0f);
  ShardSnapshot d = s->CheckpointSnapshot(true);
  const auto& plain =
      *std::find_if(d.sparse.begin(), d.sparse.end(), [](auto& t) { return t.param == "plain"; });
  std::vector<uint64_t> got = plain.keys;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, keys);
  EXPECT_EQ(plain.arena.size(), 2u * 4 * 2);  // dim 4, values and adagrad's state
  // "aged" drops rows unseen for 40 of its updates: 50 pushes of one key drop the rest, and the
  // delta names each dropped key.
  const size_t aged_rows = std::find_if(base.sparse.begin(), base.sparse.end(), [](auto& t) {
                             return t.param == "aged";
                           })->keys.size();
  std::vector<uint64_t> one = {7};
  std::vector<float> g3(3, 0.1f);
  for (int i = 0; i < 50; ++i) s->ApplySparse("aged", one, g3.data(), 1.0f);
  ShardSnapshot d2 = s->CheckpointSnapshot(true);
  const auto& aged =
      *std::find_if(d2.sparse.begin(), d2.sparse.end(), [](auto& t) { return t.param == "aged"; });
  EXPECT_EQ(aged.keys, one);
  EXPECT_GE(aged.removed.size(), aged_rows - 1);
  EXPECT_EQ(aged.t.size(), 1u);     // adam's per-row count
  EXPECT_EQ(aged.last.size(), 1u);  // the limits' last update
}

TEST(CheckpointDeltaTest, ABaseWithItsDeltasRestoresTheShardThroughManyRounds) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    auto s = NewStore();
    std::mt19937_64 rng(seed);
    Train(s.get(), rng, 100, 300);
    ShardSnapshot chain = s->CheckpointSnapshot(false);
    const ShardSnapshot base = chain;
    std::vector<ShardSnapshot> deltas;
    for (int round = 0; round < 12; ++round) {
      // Changes of every size, over key ranges that grow (new rows) and keys that stop coming
      // (evictions in "aged", the budget in "small").
      const int pushes = 1 + static_cast<int>(rng() % 6);
      for (int p = 0; p < pushes; ++p) Train(s.get(), rng, 1 + rng() % 120, 300 + 100 * round);
      ShardSnapshot delta = s->CheckpointSnapshot(true);
      ASSERT_TRUE(delta.delta);
      // Through the file format too.
      Checkpoint c{"j", 0, round + 1, 0, delta, "parent-uuid"};
      auto back = DecodeCheckpoint(EncodeCheckpoint(c), "delta");
      ASSERT_TRUE(back.ok()) << back.status();
      ASSERT_EQ(back->shard, delta);
      ASSERT_TRUE(ApplyDelta(&chain, back->shard).ok());
      deltas.push_back(delta);
      auto restored = std::make_unique<ShardStore>(0, DeltaJob(), SlotMap::RoundRobin(16, 1));
      ASSERT_TRUE(restored->Restore(chain).ok()) << "round " << round;
      ASSERT_EQ(Canonical(restored->Snapshot()), Canonical(s->Snapshot())) << "round " << round;
    }
    // All twelve at once (recovery's way: one index per table for the whole chain).
    ShardSnapshot at_once = base;
    ASSERT_TRUE(ApplyDeltas(&at_once, deltas).ok());
    EXPECT_EQ(Canonical(at_once), Canonical(chain));
  }
}

TEST(CheckpointDeltaTest, MisfitsAreRefusedNamingTheTable) {
  auto s = NewStore();
  std::mt19937_64 rng(5);
  Train(s.get(), rng, 20, 100);
  ShardSnapshot base = s->CheckpointSnapshot(false);
  Train(s.get(), rng, 20, 100);
  ShardSnapshot delta = s->CheckpointSnapshot(true);
  ShardSnapshot copy = base;
  EXPECT_EQ(ApplyDelta(&copy, base).code(), StatusCode::kInvalidArgument);  // not a delta
  ShardSnapshot short_rows = delta;
  for (auto& t : short_rows.sparse)
    if (t.param == "plain" && !t.arena.empty()) t.arena.pop_back();
  copy = base;
  Status st = ApplyDelta(&copy, short_rows);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("'plain'"), std::string::npos) << st;
  ShardSnapshot unknown = delta;
  unknown.sparse[0].param = "nope";
  copy = base;
  EXPECT_EQ(ApplyDelta(&copy, unknown).code(), StatusCode::kDataLoss);
  // A delta file must name the file it applies on; a whole one must not.
  Checkpoint orphan{"j", 0, 1, 0, delta, ""};
  EXPECT_EQ(DecodeCheckpoint(EncodeCheckpoint(orphan), "f").status().code(), StatusCode::kDataLoss);
}

TEST(CheckpointDeltaTest, TooManyDroppedKeysToKeepMakeTheNextCopyWhole) {
  auto s = std::make_unique<ShardStore>(0, DeltaJob(), SlotMap::RoundRobin(16, 1));
  ASSERT_TRUE(s->Declare(Sparse("aged", "sgd:lr=1", 1, "evict_after=8")).ok());
  (void)s->CheckpointSnapshot(false);
  const int64_t small = s->DeltaBytes();
  // 100k keys pushed once each, in batches: all but the newest are dropped again, more than
  // the 64 Ki `removed` keeps.
  std::vector<float> g(1000, 1.0f);
  for (uint64_t b = 0; b < 100; ++b) {
    std::vector<uint64_t> keys(1000);
    std::iota(keys.begin(), keys.end(), b * 1000);
    s->ApplySparse("aged", keys, g.data(), 1.0f);
  }
  EXPECT_GT(s->DeltaBytes(), int64_t{1} << 50) << "a delta must look too big to take";
  EXPECT_FALSE(s->CheckpointSnapshot(true).delta);
  EXPECT_LE(s->DeltaBytes(), small);  // tracking again from the whole copy
  EXPECT_TRUE(s->CheckpointSnapshot(true).delta);
}

}  // namespace
}  // namespace tessera
