// ChangeStamps: the elements a gradient touched since a token, and every token that cannot be
// answered so (another tracker's, from before a reset, zero, from the future) answered whole.
#include "pserver/change_stamps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tessera {
namespace {

TEST(ChangeStampsTest, APullGetsWhatChangedSinceItsTokenAndNothingElse) {
  ChangeStamps s(7);
  std::vector<uint32_t> out;
  const uint64_t start = s.token();
  ASSERT_TRUE(s.ChangedSince("w", 0, start, &out));
  EXPECT_TRUE(out.empty());  // nothing applied yet
  s.BeginApply();
  const float g1[6] = {0, 1, 0, 0, -2, 0};
  s.Applied("w", 0, g1, 6);
  const uint64_t after1 = s.token();
  s.BeginApply();
  const float g2[6] = {0, 0, 0, 3, 0, 0};
  s.Applied("w", 0, g2, 6);
  s.Applied("w", 1, g2, 6);
  ASSERT_TRUE(s.ChangedSince("w", 0, start, &out));
  EXPECT_EQ(out, (std::vector<uint32_t>{1, 3, 4}));
  ASSERT_TRUE(s.ChangedSince("w", 0, after1, &out));
  EXPECT_EQ(out, (std::vector<uint32_t>{3}));
  ASSERT_TRUE(s.ChangedSince("w", 0, s.token(), &out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(s.ChangedSince("v", 2, after1, &out));  // a block never touched
  EXPECT_TRUE(out.empty());

  // Tokens it cannot answer: none yet (0), another tracker's, from the future, and after a reset
  // anything handed out before it.
  EXPECT_FALSE(s.ChangedSince("w", 0, 0, &out));
  EXPECT_FALSE(s.ChangedSince("w", 0, (uint64_t{8} << 32) | 2, &out));
  EXPECT_FALSE(s.ChangedSince("w", 0, s.token() + 1, &out));
  const uint64_t before_reset = s.token();
  s.Reset(9);
  EXPECT_FALSE(s.ChangedSince("w", 0, before_reset, &out));
  EXPECT_FALSE(s.ChangedSince("w", 0, (after1 & 0xffffffffu) | (uint64_t{9} << 32), &out));
  ASSERT_TRUE(s.ChangedSince("w", 0, s.token(), &out));
  EXPECT_TRUE(out.empty());
}

// A pull whose changes would outweigh the block stops scanning at `most` and is answered whole.
TEST(ChangeStampsTest, MoreChangesThanTheLimitAnswerWhole) {
  ChangeStamps s(7);
  std::vector<uint32_t> out;
  const uint64_t start = s.token();
  s.BeginApply();
  const float g[6] = {1, 0, 2, 3, 0, 4};
  s.Applied("w", 0, g, 6);
  ASSERT_TRUE(s.ChangedSince("w", 0, start, &out, 4));
  EXPECT_EQ(out, (std::vector<uint32_t>{0, 2, 3, 5}));
  EXPECT_FALSE(s.ChangedSince("w", 0, start, &out, 3));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(s.ChangedSince("w", 0, start, &out, 0));
  ASSERT_TRUE(s.ChangedSince("w", 0, s.token(), &out, 0));  // nothing since: within any limit
  EXPECT_TRUE(out.empty());
}

// An apply that changed every element of a block answers without a scan, and the same as one.
TEST(ChangeStampsTest, AnApplyThatChangedEveryElementAnswersAllOfThem) {
  ChangeStamps s(7);
  std::vector<uint32_t> out;
  const uint64_t start = s.token();
  s.BeginApply();
  const float some[4] = {0, 1, 0, 2};
  s.Applied("w", 0, some, 4);
  const uint64_t after_some = s.token();
  s.BeginApply();
  const float all[4] = {1, -1, 3, 2};
  s.Applied("w", 0, all, 4);
  const uint64_t after_all = s.token();
  ASSERT_TRUE(s.ChangedSince("w", 0, start, &out));
  EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3}));
  ASSERT_TRUE(s.ChangedSince("w", 0, after_some, &out));
  EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_FALSE(s.ChangedSince("w", 0, after_some, &out, 3));
  ASSERT_TRUE(s.ChangedSince("w", 0, after_all, &out));
  EXPECT_TRUE(out.empty());
  // A later apply that changes some: since then only those, since before it every element.
  s.BeginApply();
  s.Applied("w", 0, some, 4);
  ASSERT_TRUE(s.ChangedSince("w", 0, after_all, &out));
  EXPECT_EQ(out, (std::vector<uint32_t>{1, 3}));
  ASSERT_TRUE(s.ChangedSince("w", 0, after_some, &out));
  EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3}));
}

// A block of many elements (scanned 16 at a time where the CPU allows, the tail one at a time):
// the same indices as a plain scan, and the limit stops it at the same count.
TEST(ChangeStampsTest, ALargeBlockAnswersAsAPlainScanWould) {
  ChangeStamps s(7);
  const size_t n = 1000 + 9;
  std::vector<float> g(n, 0.0f);
  std::vector<uint32_t> expect, out;
  const uint64_t start = s.token();
  for (size_t i = 0; i < n; i += 7) g[i] = 1;
  s.BeginApply();
  s.Applied("w", 0, g.data(), n);
  const uint64_t middle = s.token();
  std::fill(g.begin(), g.end(), 0.0f);
  for (size_t i = 3; i < n; i += 11) g[i] = -1;
  g[n - 1] = 2;
  s.BeginApply();
  s.Applied("w", 0, g.data(), n);
  for (size_t i = 0; i < n; ++i)
    if (i % 7 == 0 || (i >= 3 && (i - 3) % 11 == 0) || i == n - 1) expect.push_back(static_cast<uint32_t>(i));
  ASSERT_TRUE(s.ChangedSince("w", 0, start, &out));
  EXPECT_EQ(out, expect);
  ASSERT_TRUE(s.ChangedSince("w", 0, start, &out, expect.size()));
  EXPECT_EQ(out, expect);
  EXPECT_FALSE(s.ChangedSince("w", 0, start, &out, expect.size() - 1));
  expect.clear();
  for (size_t i = 3; i < n; i += 11) expect.push_back(static_cast<uint32_t>(i));
  expect.push_back(static_cast<uint32_t>(n - 1));
  ASSERT_TRUE(s.ChangedSince("w", 0, middle, &out));
  EXPECT_EQ(out, expect);
}

}  // namespace
}  // namespace tessera
