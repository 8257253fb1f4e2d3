#include "pserver/shard_store.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/hash.h"
#include "pserver/initializer.h"

namespace tessera {
namespace {

JobConfig Job(int pservers, int64_t block_size) {
  JobConfig j;
  j.pservers = pservers;
  j.slots = 64;
  j.block_size = block_size;
  return j;
}

TEST(ShardStoreTest, OwnsExactlyItsBlocksAcrossPservers) {
  auto job = Job(3, 10);
  auto slots = SlotMap::RoundRobin(64, 3);
  ParamDecl w{"w", false, 95, 0, *OptimizerConfig::Parse("sgd:lr=1")};
  int owned_total = 0;
  for (int p = 0; p < 3; ++p) {
    ShardStore s(p, job, slots);
    ASSERT_TRUE(s.Declare(w).ok());
    for (int64_t b = 0; b < 10; ++b) {
      int64_t len = b == 9 ? 5 : 10;
      bool mine = slots.PserverOf(SlotOfBlock("w", b, 64)) == p;
      EXPECT_EQ(s.CheckDense("w", b, len).ok(), mine) << p << " " << b;
      owned_total += mine;
    }
  }
  EXPECT_EQ(owned_total, 10);
}

TEST(ShardStoreTest, ChecksNameBlockAndSizeWithClearMessages) {
  auto job = Job(1, 10);
  ShardStore s(0, job, SlotMap::RoundRobin(64, 1));
  ASSERT_TRUE(s.Declare({"w", false, 25, 0, {}}).ok());
  ASSERT_TRUE(s.Declare({"emb", true, 0, 4, {}}).ok());
  EXPECT_NE(s.CheckDense("nope", 0, 10).message().find("unknown parameter 'nope'"), std::string::npos);
  EXPECT_NE(s.CheckDense("w", 3, 10).message().find("blocks 0..2"), std::string::npos);
  auto wrong = s.CheckDense("w", 2, 10);
  EXPECT_NE(wrong.message().find("expected 5 elements, got 10"), std::string::npos) << wrong;
  EXPECT_NE(s.CheckDense("emb", 0, 4).message().find("sparse table"), std::string::npos);
  EXPECT_NE(s.CheckSparse("w", {}).message().find("dense parameter"), std::string::npos);
  // Re-declaring identically is fine; differently is refused.
  EXPECT_TRUE(s.Declare({"w", false, 25, 0, {}}).ok());
  EXPECT_EQ(s.Declare({"w", false, 26, 0, {}}).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(s.Declare({"bad", false, 0, 0, {}}).ok());
}

TEST(ShardStoreTest, SparseRowsAreCreatedOnFirstTouchWithTheInitializer) {
  auto job = Job(1, 10);
  ShardStore s(0, job, SlotMap::RoundRobin(64, 1));
  ParamDecl t{"emb",
              true,
              0,
              3,
              *OptimizerConfig::Parse("sgd:lr=0.5"),
              *InitializerConfig::Parse("uniform:-1,1,seed=9")};
  ASSERT_TRUE(s.Declare(t).ok());
  std::vector<uint64_t> keys{7, 100, 7};
  std::vector<float> out(9);
  s.ReadSparse("emb", keys, out.data());
  float expect[3];
  InitRow(t.init, Hash64("emb"), 7, expect, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i], expect[i]);
    EXPECT_EQ(out[6 + i], expect[i]);
  }
  std::vector<float> g{2, 2, 2};
  std::vector<uint64_t> one{100};
  s.ApplySparse("emb", one, g.data(), 0.5f);  // mean gradient 1, lr 0.5: row drops by 0.5
  std::vector<float> after(3);
  s.ReadSparse("emb", one, after.data());
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(after[i], out[3 + i] - 0.5f);
  EXPECT_EQ(s.Stats()[0].elements, 2);  // two rows exist
}

// Many new rows in one read: the table grows (its arena moves) while the rows are copied out,
// and every row read is its key's initial value.
TEST(ShardStoreTest, AReadOfManyNewRowsGivesEachItsInitialValue) {
  auto job = Job(1, 10);
  ShardStore s(0, job, SlotMap::RoundRobin(64, 1));
  ParamDecl t{"emb", true, 0, 4, *OptimizerConfig::Parse("adam:lr=0.1"), *InitializerConfig::Parse("normal:0,1")};
  ASSERT_TRUE(s.Declare(t).ok());
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = Mix64(i + 1);
  std::vector<float> got(keys.size() * 4), expect(4);
  s.ReadSparse("emb", keys, got.data());
  size_t wrong = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    InitRow(t.init, Hash64("emb"), keys[i], expect.data(), 4);
    for (int j = 0; j < 4; ++j) wrong += got[i * 4 + j] != expect[j];
  }
  EXPECT_EQ(wrong, 0u);
}

TEST(ShardStoreTest, DenseSetAndApply) {
  auto job = Job(1, 4);
  ShardStore s(0, job, SlotMap::RoundRobin(64, 1));
  ASSERT_TRUE(s.Declare({"w", false, 6, 0, *OptimizerConfig::Parse("sgd:lr=0.1")}).ok());
  std::vector<float> v{1, 2, 3, 4};
  s.SetDense("w", 0, v.data());
  std::vector<float> g{10, 10, 10, 10};
  s.ApplyDense("w", 0, g.data(), 0.5f);
  const float* now = s.DenseValues("w", 0);
  EXPECT_FLOAT_EQ(now[0], 0.5f);
  EXPECT_FLOAT_EQ(now[3], 3.5f);
}

}  // namespace
}  // namespace tessera
