// For the pserver's unit tests: one pserver's store holding everything, with the dense "w" (25
// floats in blocks of 10: blocks 0 and 1 of 10, block 2 of 5) and the table "emb" (rows of 3).
#pragma once

#include <gtest/gtest.h>

#include "pserver/shard_store.h"

namespace tessera {

class OneShardTest : public ::testing::Test {
 protected:
  OneShardTest() : store_(0, Job(), SlotMap::RoundRobin(64, 1)) {
    EXPECT_TRUE(store_.Declare({"w", false, 25, 0, *OptimizerConfig::Parse("sgd:lr=1")}).ok());
    EXPECT_TRUE(store_.Declare({"emb", true, 0, 3, *OptimizerConfig::Parse("sgd:lr=1")}).ok());
  }
  static JobConfig Job() {
    JobConfig j;
    j.slots = 64;
    j.block_size = 10;
    return j;
  }
  ShardStore store_;
};

}  // namespace tessera
