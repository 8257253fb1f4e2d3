#include "common/hash.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace tessera {
namespace {

// These values are a contract (placement of blocks and keys on slots): they must never change.
TEST(HashTest, StableValues) {
  EXPECT_EQ(Mix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(Hash64("", 0), Hash64("", 0));
  EXPECT_NE(Hash64("a"), Hash64("b"));
  EXPECT_NE(Hash64("w", 1), Hash64("w", 2));
  EXPECT_NE(HashCombine(1, 2), HashCombine(2, 1));
}

TEST(HashTest, SpreadsKeysEvenlyOverSlots) {
  const int kSlots = 64;
  const int kKeys = 64000;
  std::vector<int> count(kSlots);
  for (uint64_t k = 0; k < kKeys; ++k) ++count[Mix64(k) % kSlots];
  for (int c : count) {
    EXPECT_GT(c, 1000 * 0.85);
    EXPECT_LT(c, 1000 * 1.15);
  }
}

TEST(HashTest, FewCollisionsOnNames) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 100000; ++i) seen.insert(Hash64("layer" + std::to_string(i) + ".weight"));
  EXPECT_EQ(seen.size(), 100000u);
}

}  // namespace
}  // namespace tessera
