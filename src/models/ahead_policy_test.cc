// AheadPolicy: off when not enabled; tries every step while the pserver tells; rests after
// kFutileInARow futile tries in a row and then tries again; a told try clears the streak.
#include "models/ahead_policy.h"

#include <gtest/gtest.h>

namespace tessera::models {
namespace {

TEST(AheadPolicyTest, NeverTriesWhenNotEnabled) {
  AheadPolicy p(false);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(p.Try());
}

TEST(AheadPolicyTest, TriesEveryStepWhileThePserverTells) {
  AheadPolicy p(true);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(p.Try()) << i;
    p.Tried(i % AheadPolicy::kFutileInARow != 0);  // futile now and then, never 8 in a row
  }
}

TEST(AheadPolicyTest, RestsAfterFutileTriesInARowThenTriesAgain) {
  AheadPolicy p(true);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < AheadPolicy::kFutileInARow; ++i) {
      ASSERT_TRUE(p.Try()) << round << " " << i;
      p.Tried(false);
    }
    for (int64_t i = 0; i < AheadPolicy::kRestAfterFutile; ++i) ASSERT_FALSE(p.Try()) << round << " " << i;
  }
  // Back: one told try clears the streak.
  for (int i = 0; i < AheadPolicy::kFutileInARow - 1; ++i) {
    ASSERT_TRUE(p.Try());
    p.Tried(false);
  }
  ASSERT_TRUE(p.Try());
  p.Tried(true);
  for (int i = 0; i < AheadPolicy::kFutileInARow - 1; ++i) {
    ASSERT_TRUE(p.Try());
    p.Tried(false);
  }
  EXPECT_TRUE(p.Try());
}

}  // namespace
}  // namespace tessera::models
