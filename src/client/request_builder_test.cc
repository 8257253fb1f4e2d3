// RequestBuilder: a push in pieces names whole blocks of a parameter (Gradients::DenseRange):
// only those blocks are sent, from the right place in the caller's range; a range that does not
// start and end at blocks, or a range in a whole push, is refused naming the parameter.
#include "client/request_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tessera {
namespace {

class RequestBuilderTest : public ::testing::Test {
 protected:
  RequestBuilderTest() : builder_(Job(), SlotMap::RoundRobin(64, 2)) {
    EXPECT_TRUE(builder_.AddDense("w", w_.data(), w_.size(), OptimizerConfig{}).ok());
  }
  static JobConfig Job() {
    JobConfig j;
    j.pservers = 2;
    j.slots = 64;
    j.block_size = 4;
    return j;
  }
  std::vector<std::unique_ptr<LinkCall>> Calls() {
    std::vector<std::unique_ptr<LinkCall>> c;
    for (int p = 0; p < 2; ++p) c.push_back(std::make_unique<LinkCall>());
    return c;
  }
  std::vector<float> w_ = std::vector<float>(10);  // blocks [0,4) [4,8) [8,10)
  RequestBuilder builder_;
};

TEST_F(RequestBuilderTest, ARangeOfWholeBlocksSendsThoseBlocksFromTheRange) {
  std::vector<float> g = {1, 2, 3, 4, 5, 6};  // elements 4..9: blocks 1 and 2
  Gradients piece;
  piece.DenseRange("w", 4, g);
  piece.samples = 1;
  auto calls = Calls();
  std::vector<std::vector<RequestBuilder::BlockRef>> pushed;
  ASSERT_TRUE(builder_.AddPush(piece, &calls, /*ranges=*/true, &pushed).ok());
  std::vector<int64_t> blocks;
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(calls[p]->req.push_size(), static_cast<int>(calls[p]->payload.size()));
    ASSERT_EQ(pushed[p].size(), calls[p]->payload.size());
    for (int i = 0; i < calls[p]->req.push_size(); ++i) {
      const auto& seg = calls[p]->req.push(i);
      blocks.push_back(seg.block());
      const float* from = static_cast<const float*>(calls[p]->payload[i].data);
      EXPECT_EQ(from, g.data() + (seg.block() * 4 - 4)) << "block " << seg.block();
      EXPECT_EQ(calls[p]->payload[i].size, static_cast<size_t>(seg.count()) * sizeof(float));
      EXPECT_EQ(pushed[p][i].block, seg.block());
    }
  }
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(blocks, (std::vector<int64_t>{1, 2}));
}

TEST_F(RequestBuilderTest, RangesThatDoNotMatchBlocksAreRefusedNamingTheParameter) {
  std::vector<float> g(3);
  for (int64_t offset : {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{-4}}) {
    Gradients piece;
    piece.DenseRange("w", offset, g);  // 3 elements: never a whole block of 4 (8..11 is past 10)
    piece.samples = 1;
    auto calls = Calls();
    Status s = builder_.AddPush(piece, &calls, /*ranges=*/true);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << offset;
    EXPECT_NE(s.message().find("of 'w' (10 elements) does not start and end at blocks of 4 elements"),
              std::string::npos)
        << s.message();
    EXPECT_EQ(calls[0]->req.push_size() + calls[1]->req.push_size(), 0) << "nothing built";
  }
  Gradients whole;
  std::vector<float> two(2);
  whole.DenseRange("w", 8, two);  // a valid range, but a whole push takes whole parameters
  whole.samples = 1;
  auto calls = Calls();
  Status s = builder_.AddPush(whole, &calls);
  EXPECT_NE(s.message().find("a range of 'w' needs a push in pieces"), std::string::npos) << s.message();
  EXPECT_TRUE(builder_.CheckPush(whole, /*ranges=*/true).ok());
}

}  // namespace
}  // namespace tessera
