// Checkpoint files round-trip a shard exactly and refuse every kind of damage; a ShardStore
// restored from a snapshot equals the original and refuses one that does not fit.
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_file.h"
#include "common/files.h"
#include "job/slot_map.h"

namespace tessera {
namespace {

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.pservers = 2;
    job_.slots = 64;
    job_.block_size = 8;
    slots_ = SlotMap::RoundRobin(job_.slots, job_.pservers);
    dir_ = *MakeTempDir("ckpt-test-");
  }
  void TearDown() override { (void)RemoveAll(dir_); }

  // A store with a dense parameter (Adam: two state arrays) and a sparse table, trained a little.
  ShardStore Trained() {
    ShardStore s(0, job_, slots_);
    ParamDecl w{"w", false, 100, 0, *OptimizerConfig::Parse("adam:lr=0.01"), {}};
    ParamDecl e{"emb",
                true,
                0,
                4,
                *OptimizerConfig::Parse("adagrad:lr=0.1"),
                *InitializerConfig::Parse("normal:0,0.1")};
    EXPECT_TRUE(s.Declare(w).ok());
    EXPECT_TRUE(s.Declare(e).ok());
    std::vector<float> g(8, 0.5f);
    for (const auto& b : s.Snapshot().dense) s.ApplyDense("w", b.block, g.data(), 1.0f);
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 200 && keys.size() < 20; ++k) {
      if (s.CheckSparse("emb", std::span<const uint64_t>(&k, 1)).ok()) keys.push_back(k);
    }
    std::vector<float> rows(keys.size() * 4, 0.25f);
    s.ApplySparse("emb", keys, rows.data(), 1.0f);
    return s;
  }

  JobConfig job_;
  SlotMap slots_;
  std::string dir_;
};

TEST_F(CheckpointFileTest, RoundTripsAShardExactly) {
  ShardStore s = Trained();
  Checkpoint c{"job", 0, 42, 1234, s.Snapshot()};
  ASSERT_FALSE(c.shard.dense.empty());
  ASSERT_EQ(c.shard.sparse.size(), 1u);
  ASSERT_EQ(c.shard.sparse[0].keys.size(), 20u);
  auto w = WriteCheckpoint(dir_, c);
  ASSERT_TRUE(w.ok()) << w.status();
  auto back = ReadCheckpoint(w->path, w->digest);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->version, 42);
  EXPECT_EQ(back->job, "job");
  EXPECT_EQ(back->shard, c.shard);
  // And a fresh store restored from it holds the same, and goes on identically.
  ShardStore r(0, job_, slots_);
  ASSERT_TRUE(r.Restore(back->shard).ok());
  EXPECT_EQ(r.Snapshot(), s.Snapshot());
  std::vector<float> g(8, -1.0f);
  int64_t b0 = c.shard.dense[0].block;
  s.ApplyDense("w", b0, g.data(), 0.5f);
  r.ApplyDense("w", b0, g.data(), 0.5f);
  EXPECT_EQ(r.Snapshot(), s.Snapshot()) << "optimizer state and step counts came back too";
}

TEST_F(CheckpointFileTest, EveryKindOfDamageIsRefusedWithItsName) {
  Checkpoint c{"job", 0, 7, 1, Trained().Snapshot()};
  std::string bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(DecodeCheckpoint(bytes, "f").ok());
  for (size_t i = 0; i < bytes.size(); i += std::max<size_t>(1, bytes.size() / 300)) {
    std::string bad = bytes;
    bad[i] ^= 0x01;
    auto d = DecodeCheckpoint(bad, "f");
    ASSERT_FALSE(d.ok()) << "flip at byte " << i << " went unnoticed";
    EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(d.status().message().find("checkpoint f"), std::string::npos);
  }
  for (size_t cut : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_EQ(DecodeCheckpoint(bytes.substr(0, cut), "f").status().code(), StatusCode::kDataLoss) << cut;
  }
  auto w = WriteCheckpoint(dir_, c);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(ReadCheckpoint(w->path, "0000").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ReadCheckpoint(dir_ + "/nope.tsck", "").status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointFileTest, RestoreRefusesAShardOfAnotherPserverAndChangesNothing) {
  ShardStore mine = Trained();
  ShardStore other(1, job_, slots_);
  ASSERT_TRUE(other.Declare({"w", false, 100, 0, *OptimizerConfig::Parse("adam:lr=0.01"), {}}).ok());
  ShardSnapshot before = mine.Snapshot();
  Status s = mine.Restore(other.Snapshot());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(mine.Snapshot(), before);
}

}  // namespace
}  // namespace tessera
