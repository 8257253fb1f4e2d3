// RequestBuilder: a push in pieces names whole blocks of a parameter (Gradients::DenseRange):
// only those blocks are sent, from the right place in the caller's range; a range that does not
// start and end at blocks, or a range in a whole push, is refused naming the parameter. A large
// pull is cut into parts of whole segments that together pull every block once, in order.
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

// One pserver; 'w' of 42 elements in 11 blocks (ten of 4 elements, 16 bytes; one of 2); table 'e'.
class SplitTest : public ::testing::Test {
 protected:
  SplitTest() : builder(Job(), SlotMap::RoundRobin(1, 1)) {
    EXPECT_TRUE(builder.AddDense("w", w.data(), w.size(), OptimizerConfig{}).ok());
    EXPECT_TRUE(builder.AddSparse("e", 2, InitializerConfig{}, OptimizerConfig{}).ok());
  }
  static JobConfig Job() {
    JobConfig j;
    j.pservers = 1;
    j.slots = 1;
    j.block_size = 4;
    return j;
  }
  std::vector<float> w = std::vector<float>(42);
  RequestBuilder builder;
};

TEST_F(SplitTest, APullIsCutIntoPartsOfWholeSegmentsThatTogetherPullEveryBlockOnce) {
  auto pull = [&] {
    std::vector<std::unique_ptr<LinkCall>> calls;
    calls.push_back(std::make_unique<LinkCall>());
    builder.AddDensePull(&calls);
    calls[0]->req.set_need(7);
    return std::move(calls[0]);
  };
  auto parts = RequestBuilder::SplitPull(pull(), 48);  // 168 bytes: parts of 3 blocks
  ASSERT_EQ(parts.size(), 4u);
  std::vector<int64_t> blocks;
  std::vector<float*> into;
  for (const auto& p : parts) {
    EXPECT_EQ(p->req.need(), 7);
    ASSERT_EQ(p->reply.size(), static_cast<size_t>(p->req.pull_size()));
    for (int i = 0; i < p->req.pull_size(); ++i) {
      blocks.push_back(p->req.pull(i).block());
      into.push_back(static_cast<float*>(p->reply[i].data));
      EXPECT_EQ(p->reply[i].size, static_cast<size_t>(p->req.pull(i).count()) * sizeof(float));
    }
  }
  EXPECT_EQ(parts[0]->req.pull_size(), 3);
  EXPECT_EQ(parts[3]->req.pull_size(), 2);
  ASSERT_EQ(blocks.size(), 11u);
  for (int64_t b = 0; b < 11; ++b) {
    EXPECT_EQ(blocks[b], b);
    EXPECT_EQ(into[b], w.data() + 4 * b);
  }
  // Smaller than two parts, or not a plain pull: left whole.
  EXPECT_EQ(RequestBuilder::SplitPull(pull(), 100).size(), 1u);
  auto with_push = pull();
  with_push->req.add_push();
  EXPECT_EQ(RequestBuilder::SplitPull(std::move(with_push), 16).size(), 1u);
}

// An async push is cut the same way, into pieces 0, 1, ... (more_pieces on all but the last),
// each sending its blocks from the caller's gradient, and a pull with it follows as plain pulls;
// one with sparse rows stays whole.
TEST_F(SplitTest, APushIsCutIntoNumberedPiecesThatTogetherSendEveryBlockOnce) {
  std::vector<float> g(42, 1.0f);
  Gradients grads;
  grads.Dense("w", g);
  grads.samples = 3;
  auto push = [&](const Gradients& gr) {
    std::vector<std::unique_ptr<LinkCall>> calls;
    calls.push_back(std::make_unique<LinkCall>());
    EXPECT_TRUE(builder.AddPush(gr, &calls).ok());
    calls[0]->req.set_step(5);
    return std::move(calls[0]);
  };
  auto parts = RequestBuilder::SplitPush(push(grads), 48);
  ASSERT_EQ(parts.size(), 4u);
  int64_t next_block = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const auto& p = *parts[k];
    EXPECT_EQ(p.req.piece(), static_cast<int>(k));
    EXPECT_EQ(p.req.more_pieces(), k + 1 < parts.size());
    EXPECT_EQ(p.req.step(), 5);
    EXPECT_EQ(p.req.samples(), 3);
    EXPECT_TRUE(p.req.is_push());
    ASSERT_EQ(p.payload.size(), static_cast<size_t>(p.req.push_size()));
    for (int i = 0; i < p.req.push_size(); ++i, ++next_block) {
      EXPECT_EQ(p.req.push(i).block(), next_block);
      EXPECT_EQ(p.payload[i].data, g.data() + 4 * next_block);
    }
  }
  EXPECT_EQ(next_block, 11);
  // With sparse rows, or a pull: whole.
  Gradients mixed = grads;
  std::vector<uint64_t> keys = {1};
  std::vector<float> rows = {1, 1};
  mixed.Sparse("e", keys, rows);
  EXPECT_EQ(RequestBuilder::SplitPush(push(mixed), 48).size(), 1u);
  // With a dense pull: the pieces, then the pull as plain pulls of the same blocks, in parts.
  auto with_pull = push(grads);
  std::vector<std::unique_ptr<LinkCall>> one;
  one.push_back(std::move(with_pull));
  builder.AddDensePull(&one);
  one[0]->req.set_need(9);
  auto all = RequestBuilder::SplitPush(std::move(one[0]), 48);
  ASSERT_EQ(all.size(), 8u);
  next_block = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const auto& p = *all[k];
    const bool piece = k < 4;
    EXPECT_EQ(p.req.is_push(), piece);
    EXPECT_EQ(p.req.push_size() > 0, piece);
    EXPECT_EQ(p.req.pull_size() > 0, !piece);
    EXPECT_EQ(p.req.need(), 9);
    if (piece) continue;
    EXPECT_EQ(p.req.samples(), 0);
    EXPECT_FALSE(p.req.more_pieces());
    ASSERT_EQ(p.reply.size(), static_cast<size_t>(p.req.pull_size()));
    for (int i = 0; i < p.req.pull_size(); ++i, ++next_block) {
      EXPECT_EQ(p.req.pull(i).block(), next_block);
      EXPECT_EQ(p.reply[i].data, w.data() + 4 * next_block);
    }
  }
  EXPECT_EQ(next_block, 11);
}

}  // namespace
}  // namespace tessera
