#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace tessera {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("", 0), 0u);
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
}

TEST(Crc32cTest, ExtendEqualsWholeAtEverySplit) {
  std::mt19937 rng(7);
  std::string data(1000, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  uint32_t whole = Crc32c(data.data(), data.size());
  for (size_t split = 0; split <= data.size(); split += 37) {
    uint32_t a = Crc32c(data.data(), split);
    EXPECT_EQ(Crc32cExtend(a, data.data() + split, data.size() - split), whole) << split;
  }
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  std::string data = "tessera record payload";
  uint32_t good = Crc32c(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string bad = data;
      bad[i] ^= static_cast<char>(1 << b);
      EXPECT_NE(Crc32c(bad.data(), bad.size()), good);
    }
  }
}

}  // namespace
}  // namespace tessera
