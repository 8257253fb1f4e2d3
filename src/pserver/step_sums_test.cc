// StepSums: a sync step's blocks summed in contributor order (bit for bit), a block sent once
// passed through, the sums ordered by parameter and block, sparse rows summed by key.
#include "pserver/step_sums.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(StepSumsTest, BlocksAreSummedInTheOrderTheirContributorsCame) {
  const std::string w = "w";
  // Float addition is not associative: (1e8 + 1) - 1e8 is 0, (1e8 - 1e8) + 1 is 1.
  const float a[] = {1e8f, 2}, b[] = {1, 3}, c[] = {-1e8f, 4};
  StepSums s;
  s.Begin();
  s.AddDense(&w, 0, 2, a);
  s.AddDense(&w, 0, 2, b);
  s.AddDense(&w, 0, 2, c);
  const auto& sums = s.SumDense();
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].grad[0], 0.0f);
  EXPECT_EQ(sums[0].grad[1], 9.0f);
  EXPECT_EQ(sums[0].count, 2);

  s.Begin();
  s.AddDense(&w, 0, 2, a);
  s.AddDense(&w, 0, 2, c);
  s.AddDense(&w, 0, 2, b);
  EXPECT_EQ(s.SumDense()[0].grad[0], 1.0f) << "another order, another sum: the order is kept";
}

TEST(StepSumsTest, ABlockSentOnceIsPassedThroughAndTheSumsAreOrderedByBlock) {
  const std::string w = "w", b_param = "b";
  const float x[] = {1, 2}, y[] = {3, 4}, z[] = {5};
  StepSums s;
  s.Begin();
  s.AddDense(&w, 1, 2, x);
  s.AddDense(&b_param, 0, 1, z);
  s.AddDense(&w, 0, 2, y);
  s.AddDense(&w, 1, 2, y);
  const auto& sums = s.SumDense();
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(*sums[0].param, "b");
  EXPECT_EQ(sums[0].grad, z) << "sent once: the sender's own gradient, not a copy";
  EXPECT_EQ(*sums[1].param, "w");
  EXPECT_EQ(sums[1].block, 0);
  EXPECT_EQ(sums[1].grad, y);
  EXPECT_EQ(sums[2].block, 1);
  EXPECT_EQ(sums[2].grad[0], 4.0f);
  EXPECT_EQ(sums[2].grad[1], 6.0f);
  // The next step starts empty.
  s.Begin();
  EXPECT_TRUE(s.SumDense().empty());
  EXPECT_TRUE(s.sparse().empty());
}

TEST(StepSumsTest, SparseRowsAreSummedByKeyInTheOrderFirstSeen) {
  StepSums s;
  s.Begin();
  const uint64_t k1[] = {7, 3};
  const float r1[] = {1, 1, 2, 2};
  const uint64_t k2[] = {3, 9};
  const float r2[] = {10, 10, 5, 6};
  s.AddSparse("emb", k1, 2, r1);
  s.AddSparse("emb", k2, 2, r2);
  const auto& t = s.sparse().at("emb");
  EXPECT_EQ(t.keys, (std::vector<uint64_t>{7, 3, 9}));
  EXPECT_EQ(t.rows, (std::vector<float>{1, 1, 12, 12, 5, 6}));
}

}  // namespace
}  // namespace tessera
