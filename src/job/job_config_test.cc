#include "job/job_config.h"

#include <gtest/gtest.h>

#include <set>

#include "job/placement.h"
#include "job/slot_map.h"

namespace tessera {
namespace {

TEST(JobConfigTest, JsonRoundTrip) {
  JobConfig c;
  c.pservers = 3;
  c.slots = 256;
  c.block_size = 1000;
  c.mode = *ConsistencyMode::Parse("ssp:2");
  c.optimizer = *OptimizerConfig::Parse("adam:lr=0.001");
  c.min_trainers = 2;
  c.token = "tok";
  c.created_ms = 42;
  c.wire = *WireChoice::Parse("topk:0.01,emb=bf16");
  auto back = JobConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pservers, 3);
  EXPECT_EQ(back->slots, 256);
  EXPECT_EQ(back->block_size, 1000);
  EXPECT_EQ(back->mode, c.mode);
  EXPECT_EQ(back->optimizer, c.optimizer);
  EXPECT_EQ(back->min_trainers, 2);
  EXPECT_EQ(back->token, "tok");
  EXPECT_EQ(back->wire, c.wire);
  // A job written before wire formats travels in float32.
  JobConfig old;
  old.token = "t";
  ASSERT_EQ(old.ToJson().find("wire"), std::string::npos);
  EXPECT_TRUE(JobConfig::FromJson(old.ToJson())->wire.plain());
}

TEST(JobConfigTest, RejectsBadValuesAndCorruptJson) {
  JobConfig c;
  c.pservers = 0;
  EXPECT_FALSE(c.Validate().ok());
  c.pservers = 8;
  c.slots = 4;
  EXPECT_NE(c.Validate().message().find("slots"), std::string::npos);
  EXPECT_EQ(JobConfig::FromJson("{not json").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(JobConfig::FromJson("{\"pservers\":1}").status().code(), StatusCode::kDataLoss);
}

TEST(ModeTest, ParseAndPrint) {
  EXPECT_EQ(ConsistencyMode::Parse("sync")->kind, ConsistencyMode::Kind::kSync);
  EXPECT_EQ(ConsistencyMode::Parse("async")->kind, ConsistencyMode::Kind::kAsync);
  auto ssp = ConsistencyMode::Parse("ssp:3");
  ASSERT_TRUE(ssp.ok());
  EXPECT_EQ(ssp->staleness, 3);
  EXPECT_EQ(ssp->ToString(), "ssp:3");
  EXPECT_FALSE(ConsistencyMode::Parse("ssp:-1").ok());
  EXPECT_FALSE(ConsistencyMode::Parse("ssp:x").ok());
  EXPECT_NE(ConsistencyMode::Parse("bsp").status().message().find("bsp"), std::string::npos);
}

TEST(SlotMapTest, RoundRobinJsonAndValidation) {
  auto m = SlotMap::RoundRobin(10, 3);
  EXPECT_EQ(m.PserverOf(4), 1);
  EXPECT_EQ(m.SlotsOf(2), (std::vector<int>{2, 5, 8}));
  auto back = SlotMap::FromJson(m.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, m);
  EXPECT_FALSE(SlotMap::FromJson("{\"pservers\":2,\"owner\":[0,0]}").ok());  // pserver 1 idle
  EXPECT_FALSE(SlotMap::FromJson("{\"pservers\":2,\"owner\":[0,5]}").ok());
}

TEST(PlacementTest, BlocksCoverTheParameterExactly) {
  BlockLayout l{1000, 300};
  EXPECT_EQ(l.blocks(), 4);
  int64_t total = 0;
  for (int64_t b = 0; b < l.blocks(); ++b) {
    EXPECT_EQ(l.begin(b), total);
    total += l.length(b);
  }
  EXPECT_EQ(total, 1000);
  EXPECT_EQ(l.length(3), 100);
  EXPECT_EQ((BlockLayout{0, 10}).blocks(), 0);
}

TEST(PlacementTest, BlocksAndKeysSpreadOverSlotsAndPservers) {
  auto m = SlotMap::RoundRobin(1024, 4);
  std::vector<int> per(4);
  for (int64_t b = 0; b < 4000; ++b) ++per[m.PserverOf(SlotOfBlock("w", b, 1024))];
  for (int n : per) EXPECT_NEAR(n, 1000, 150);
  std::set<int> slots;
  for (uint64_t k = 0; k < 10000; ++k) slots.insert(SlotOfKey("emb", k, 1024));
  EXPECT_GT(slots.size(), 1000u);
  // Placement is a pure function of its inputs.
  EXPECT_EQ(SlotOfKey("emb", 77, 1024), SlotOfKey("emb", 77, 1024));
  EXPECT_NE(SlotOfBlock("a", 0, 1 << 20), SlotOfBlock("b", 0, 1 << 20));
}

}  // namespace
}  // namespace tessera
