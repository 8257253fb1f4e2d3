// Tests of a ShardStore's sparse tables with limits: admission, eviction, the memory budget, and
// snapshots that let a restored copy (or a backup) make the same decisions.
#include <gtest/gtest.h>

#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "pserver/initializer.h"
#include "pserver/shard_store.h"

namespace tessera {
namespace {

JobConfig OneServer() {
  JobConfig j;
  j.pservers = 1;
  j.slots = 16;
  j.block_size = 64;
  return j;
}

ParamDecl Table(const std::string& limits, const std::string& opt = "sgd:lr=1", int dim = 2) {
  ParamDecl d{
      "emb", true, 0, dim, *OptimizerConfig::Parse(opt), *InitializerConfig::Parse("uniform:-1,1,seed=5")};
  d.limits = *TableLimits::Parse(limits);
  return d;
}

struct Store {
  explicit Store(const ParamDecl& d) : s(0, OneServer(), SlotMap::RoundRobin(16, 1)) {
    EXPECT_TRUE(s.Declare(d).ok());
  }
  void Push(std::vector<uint64_t> keys, float g = 1.0f) {
    std::vector<float> grads(keys.size() * 2, g);
    s.ApplySparse("emb", keys, grads.data(), 1.0f);
  }
  std::vector<float> Read(uint64_t key) {
    std::vector<float> out(2);
    s.ReadSparse("emb", std::span<const uint64_t>(&key, 1), out.data());
    return out;
  }
  ShardStore::ParamStats Stats() { return s.Stats()[0]; }
  ShardStore s;
};

std::vector<float> Init(uint64_t key) {
  std::vector<float> v(2);
  InitRow(*InitializerConfig::Parse("uniform:-1,1,seed=5"), Hash64("emb"), key, v.data(), 2);
  return v;
}

TEST(ShardStoreLimitsTest, AnIdGetsARowAtItsNthPushAndReadsStoreNothing) {
  Store st(Table("admit=3"));
  EXPECT_EQ(st.Read(7), Init(7));  // a read of an unknown id: its initial value, nothing stored
  st.Push({7});
  st.Push({7});
  EXPECT_EQ(st.Stats().elements, 0);
  EXPECT_EQ(st.Read(7), Init(7));  // the first two pushes were dropped
  st.Push({7});
  EXPECT_EQ(st.Stats().elements, 1);
  EXPECT_EQ(st.Stats().admitted, 1);
  auto v = Init(7);
  EXPECT_EQ(st.Read(7), (std::vector<float>{v[0] - 1, v[1] - 1}));  // only the third push applied
  st.Push({7});
  EXPECT_EQ(st.Read(7), (std::vector<float>{v[0] - 2, v[1] - 2}));
}

TEST(ShardStoreLimitsTest, AdmitProbAdmitsAboutThatShareOfPushes) {
  Store st(Table("admit_prob=0.25"));
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 1000 + i;
  st.Push(keys);
  EXPECT_NEAR(st.Stats().elements / 20000.0, 0.25, 0.02);
  st.Push(keys);  // a second chance at the next update
  EXPECT_NEAR(st.Stats().elements / 20000.0, 1 - 0.75 * 0.75, 0.02);
}

TEST(ShardStoreLimitsTest, RowsUnseenForEvictAfterUpdatesAreDropped) {
  Store st(Table("evict_after=8"));
  st.Push({1, 2});
  for (int u = 0; u < 20; ++u) st.Push({2});  // 2 stays hot, 1 goes stale
  EXPECT_EQ(st.Stats().elements, 1);
  EXPECT_EQ(st.Stats().evicted, 1);
  EXPECT_EQ(st.Read(1), Init(1));  // gone: reads as new
  auto v = Init(2);
  EXPECT_EQ(st.Read(2), (std::vector<float>{v[0] - 21, v[1] - 21}));  // moved rows keep their values
  st.Push({1});                                                       // comes back as a new row
  EXPECT_EQ(st.Stats().elements, 2);
  EXPECT_EQ(st.Stats().admitted, 3);
}

TEST(ShardStoreLimitsTest, ABudgetKeepsTheTableWithinItAndTheHotRows) {
  const int64_t budget = 64 << 10;
  Store st(Table("budget=64K", "adagrad:lr=0.1", 2));
  int64_t most_rows = 0;
  for (uint64_t u = 0; u < 400; ++u) {
    std::vector<uint64_t> keys = {1, 2, 3};                               // pushed every update
    for (uint64_t i = 0; i < 50; ++i) keys.push_back(1000 + u * 50 + i);  // 50 new ids each time
    st.Push(keys);
    const auto stats = st.Stats();
    ASSERT_LE(stats.bytes, budget) << "update " << u;
    most_rows = std::max(most_rows, stats.elements);
  }
  const auto stats = st.Stats();
  EXPECT_GT(stats.evicted, 15000);
  EXPECT_EQ(stats.admitted, 3 + 400 * 50);
  EXPECT_EQ(stats.admitted - stats.evicted, stats.elements);
  EXPECT_GT(most_rows, 64 * 1024 / 100);                                     // the budget is used, not wasted
  for (uint64_t hot : {1, 2, 3}) EXPECT_NE(st.Read(hot), Init(hot)) << hot;  // never evicted
}

TEST(ShardStoreLimitsTest, ARestoredCopyMakesTheSameDecisions) {
  // A backup restored from a snapshot mid-stream and then given the same pushes holds the same
  // bits as the primary: admission counts, last updates and the budget are in the snapshot.
  const ParamDecl d = Table("admit=2,evict_after=50,budget=16K", "adam:lr=0.01");
  Store primary(d);
  auto pushes = [](uint64_t u) {
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < 30; ++i) keys.push_back((u * 7 + i * i) % 900);
    return keys;
  };
  for (uint64_t u = 0; u < 100; ++u) primary.Push(pushes(u), 0.1f * static_cast<float>(u % 3));
  const ShardSnapshot mid = primary.s.Snapshot();
  // Through a checkpoint file, as a restarted pserver would.
  Checkpoint c{"job", 0, 1, 0, mid};
  auto decoded = DecodeCheckpoint(EncodeCheckpoint(c), "test");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->shard, mid);
  Store backup(d);
  ASSERT_TRUE(backup.s.Restore(decoded->shard).ok());
  for (uint64_t u = 100; u < 300; ++u) {
    primary.Push(pushes(u), 0.1f * static_cast<float>(u % 3));
    backup.Push(pushes(u), 0.1f * static_cast<float>(u % 3));
  }
  EXPECT_EQ(primary.s.Snapshot(), backup.s.Snapshot());
  EXPECT_GT(primary.Stats().evicted, 0);
}

TEST(ShardStoreLimitsTest, RefusedWhereTheyDoNotFit) {
  ShardStore s(0, OneServer(), SlotMap::RoundRobin(16, 1));
  ParamDecl dense{"w", false, 10, 0, *OptimizerConfig::Parse("sgd")};
  dense.limits = *TableLimits::Parse("budget=1M");
  auto st = s.Declare(dense);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot have table limits"), std::string::npos);
  ASSERT_TRUE(s.Declare(Table("admit=2")).ok());
  EXPECT_FALSE(s.Declare(Table("admit=3")).ok());  // the same table declared differently
}

TEST(ShardStoreLimitsTest, UpdateCountsAreKeptForAdamOnlyAndOlderSnapshotsStillLoad) {
  Store sgd(Table(""));
  sgd.Push({1, 2, 3});
  ShardSnapshot snap = sgd.s.Snapshot();
  EXPECT_TRUE(snap.sparse[0].t.empty());  // sgd never reads them
  // A snapshot from before (every row with its count) loads, and gives the same rows.
  ShardSnapshot older = snap;
  older.sparse[0].t.assign(older.sparse[0].keys.size(), 1);
  Store restored(Table(""));
  ASSERT_TRUE(restored.s.Restore(older).ok());
  EXPECT_EQ(restored.s.Snapshot(), snap);
  older.sparse[0].t.pop_back();  // but not counts that do not match the rows
  EXPECT_FALSE(restored.s.Restore(older).ok());

  Store adam(Table("", "adam:lr=0.1"));
  adam.Push({1, 2});
  adam.Push({1});
  ShardSnapshot a = adam.s.Snapshot();
  ASSERT_EQ(a.sparse[0].t.size(), 2u);
  EXPECT_EQ(a.sparse[0].t[0] + a.sparse[0].t[1], 3);
  a.sparse[0].t.clear();  // adam needs them
  Store adam2(Table("", "adam:lr=0.1"));
  EXPECT_FALSE(adam2.s.Restore(a).ok());
}

}  // namespace
}  // namespace tessera
