#include "common/backoff.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(BackoffTest, GrowsToMaxAndResets) {
  Backoff b({std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 2.0, 0.0}, 1);
  EXPECT_EQ(b.Next().count(), 100);
  EXPECT_EQ(b.Next().count(), 200);
  EXPECT_EQ(b.Next().count(), 400);
  EXPECT_EQ(b.Next().count(), 800);
  EXPECT_EQ(b.Next().count(), 1000);
  EXPECT_EQ(b.Next().count(), 1000);
  b.Reset();
  EXPECT_EQ(b.Next().count(), 100);
}

TEST(BackoffTest, JitterStaysInBoundsAndNeverExceedsMax) {
  Backoff b({std::chrono::milliseconds(100), std::chrono::milliseconds(500), 2.0, 0.2}, 42);
  for (int i = 0; i < 200; ++i) {
    auto d = b.Next().count();
    EXPECT_GE(d, 80);
    EXPECT_LE(d, 500);
  }
}

}  // namespace
}  // namespace tessera
