// The base-or-delta decision at each of its boundaries.
#include "checkpoint/delta_policy.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(DeltaPolicyTest, ADeltaOnlyOnARecordedChainOfTheShardsGeneration) {
  const DeltaPolicy p;  // 0.5, 16
  const CheckpointChainState chain{7, 1000, 100, 2};
  EXPECT_TRUE(ChooseCheckpointKind(chain, 7, 10, p).delta);
  auto none = ChooseCheckpointKind({}, 7, 10, p);
  EXPECT_FALSE(none.delta);
  EXPECT_NE(none.why.find("no recorded"), std::string::npos);
  // A copy was taken (the shard moved to 8) but never recorded: its changes are in no file.
  auto lost = ChooseCheckpointKind(chain, 8, 10, p);
  EXPECT_FALSE(lost.delta);
  EXPECT_NE(lost.why.find("not recorded"), std::string::npos);
}

TEST(DeltaPolicyTest, ANewBaseWhenTheDeltasPassTheFractionOrTheCount) {
  const DeltaPolicy p{0.5, 3};
  // 100 so far + 400 = 500 = half of the base: still a delta; one byte more is a base.
  EXPECT_TRUE(ChooseCheckpointKind({1, 1000, 100, 1}, 1, 400, p).delta);
  auto big = ChooseCheckpointKind({1, 1000, 100, 1}, 1, 401, p);
  EXPECT_FALSE(big.delta);
  EXPECT_NE(big.why.find("50%"), std::string::npos) << big.why;
  EXPECT_TRUE(ChooseCheckpointKind({1, 1000, 0, 2}, 1, 1, p).delta);
  auto many = ChooseCheckpointKind({1, 1000, 0, 3}, 1, 1, p);
  EXPECT_FALSE(many.delta);
  EXPECT_NE(many.why.find("3 deltas"), std::string::npos);
  // A shard of dense parameters only: a delta is as big as a base, so it is always a base.
  EXPECT_FALSE(ChooseCheckpointKind({1, 1000, 0, 0}, 1, 1000, p).delta);
}

TEST(DeltaPolicyTest, AFractionOfZeroTurnsDeltasOff) {
  EXPECT_FALSE(ChooseCheckpointKind({1, 1000, 0, 0}, 1, 1, DeltaPolicy{0, 16}).delta);
}

}  // namespace
}  // namespace tessera
