// StepPieces: when a push in pieces is complete, which blocks are ready before the barrier and
// who sent them, and what is refused. A random test checks the rule over many interleavings.
#include "pserver/step_pieces.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace tessera {
namespace {

using Block = StepPieces::Block;
using Arrival = StepPieces::Arrival;

Block B(int64_t i) { return {"w", i}; }

TEST(StepPiecesTest, APushIsCompleteWhenEveryPieceUpToTheLastArrived) {
  StepPieces p;
  EXPECT_EQ(*p.Arrive("0", 1, false, 64, {B(1)}), Arrival::kStored);
  EXPECT_EQ(*p.Arrive("0", 2, true, 64, {B(2)}), Arrival::kStored);  // piece 0 is missing
  EXPECT_FALSE(p.complete("0"));
  EXPECT_EQ(*p.Arrive("0", 1, false, 64, {B(1)}), Arrival::kDuplicate);
  EXPECT_EQ(*p.Arrive("0", 0, false, 64, {B(0)}), Arrival::kComplete);
  EXPECT_TRUE(p.complete("0"));
  EXPECT_EQ(p.samples("0"), 64);
  EXPECT_EQ(p.samples("1"), -1);
  // A push not in pieces is piece 0, last.
  EXPECT_EQ(*p.Arrive("1", 0, true, 3, {B(0)}), Arrival::kComplete);
}

TEST(StepPiecesTest, ABlockIsReadyOnceEveryContributorSentItOrCompletedWithoutIt) {
  StepPieces p;
  const std::vector<std::string> both = {"0", "1"};
  ASSERT_TRUE(p.Arrive("0", 0, false, 10, {B(3)}).ok());
  EXPECT_TRUE(p.TakeReady(both).empty());  // trainer 1 sent nothing yet
  ASSERT_TRUE(p.Arrive("1", 0, false, 20, {B(5)}).ok());
  EXPECT_TRUE(p.TakeReady(both).empty());
  ASSERT_TRUE(p.Arrive("1", 1, false, 20, {B(3)}).ok());
  auto r = p.TakeReady(both);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].block, B(3));
  EXPECT_EQ(r[0].senders, (std::vector<std::pair<std::string, int>>{{"0", 0}, {"1", 1}}));
  EXPECT_TRUE(p.applied(B(3)));
  EXPECT_TRUE(p.TakeReady(both).empty());  // once
  // Trainer 0 completes without block 5: trainer 1's block 5 is ready, from it alone.
  ASSERT_TRUE(p.Arrive("0", 1, true, 10, {B(7)}).ok());
  r = p.TakeReady(both);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].block, B(5));
  EXPECT_EQ(r[0].senders, (std::vector<std::pair<std::string, int>>{{"1", 0}}));
  // Block 7 waits for trainer 1 (it may still send it).
  EXPECT_FALSE(p.applied(B(7)));
  p.Clear();
  EXPECT_FALSE(p.any_applied());
  EXPECT_TRUE(p.empty());
}

TEST(StepPiecesTest, BadPiecesAreRefusedAndKeepNothing) {
  StepPieces p;
  EXPECT_EQ(p.Arrive("0", -1, false, 1, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Arrive("0", StepPieces::kMaxPieces, false, 1, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Arrive("0", 0, false, 1, {B(1), B(1)}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(p.empty());
  ASSERT_TRUE(p.Arrive("0", 2, true, 8, {B(1)}).ok());
  auto s = p.Arrive("0", 3, false, 8, {});
  EXPECT_NE(s.status().message().find("after its last piece 2"), std::string::npos) << s.status().message();
  EXPECT_FALSE(p.Arrive("0", 1, true, 8, {}).ok());  // a second last piece
  s = p.Arrive("0", 1, false, 9, {});
  EXPECT_NE(s.status().message().find("sums 9 samples, its earlier pieces 8"), std::string::npos);
  s = p.Arrive("0", 1, false, 8, {B(1)});
  EXPECT_NE(s.status().message().find("sent in piece 2 already"), std::string::npos) << s.status().message();
  ASSERT_TRUE(p.Arrive("1", 5, false, 8, {}).ok());
  EXPECT_FALSE(p.Arrive("1", 2, true, 8, {}).ok());  // marked last below a piece already here
  EXPECT_EQ(*p.Arrive("0", 0, false, 8, {B(0)}), Arrival::kStored);
  EXPECT_EQ(*p.Arrive("0", 1, false, 8, {B(2)}), Arrival::kComplete);
}

TEST(StepPiecesTest, DroppingATrainerForgetsItsBlocksButNotWhatWasApplied) {
  StepPieces p;
  ASSERT_TRUE(p.Arrive("0", 0, false, 1, {B(0), B(1)}).ok());
  ASSERT_TRUE(p.Arrive("1", 0, false, 1, {B(0)}).ok());
  ASSERT_EQ(p.TakeReady({"0", "1"}).size(), 1u);  // block 0
  p.Drop("0");
  EXPECT_TRUE(p.applied(B(0)));
  EXPECT_EQ(p.samples("0"), -1);
  ASSERT_TRUE(p.Arrive("1", 1, true, 1, {}).ok());
  EXPECT_TRUE(p.TakeReady({"1"}).empty());  // block 1 was only trainer 0's
}

// Random pushes in pieces by 3 trainers, interleaved: a block comes back at most once, only when
// every contributor sent it or completed, with exactly its senders in order; once every push is
// complete, every block sent has come back.
TEST(StepPiecesTest, RandomInterleavingsApplyEachBlockOnceAndOnlyWhenReady) {
  const std::vector<std::string> ids = {"0", "1", "2"};
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    StepPieces p;
    struct Piece {
      std::string trainer;
      int index;
      bool last;
      std::vector<Block> blocks;
    };
    std::vector<Piece> all;
    std::map<std::string, std::set<Block>> sends;
    for (const auto& t : ids) {
      std::vector<Block> blocks;
      for (int b = 0; b < 8; ++b) {
        if (rng() % 4 != 0) blocks.push_back(B(b));
      }
      std::shuffle(blocks.begin(), blocks.end(), rng);
      const int n = 1 + static_cast<int>(rng() % 4);
      std::vector<Piece> mine(n);
      for (int i = 0; i < n; ++i) mine[i] = {t, i, i == n - 1, {}};
      for (const Block& b : blocks) mine[rng() % n].blocks.push_back(b);
      for (const Block& b : blocks) sends[t].insert(b);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::shuffle(all.begin(), all.end(), rng);
    std::set<std::string> complete;
    std::set<Block> returned;
    std::set<std::pair<std::string, int>> arrived;
    bool last_seen_early = false;
    for (size_t k = 0; k < all.size(); ++k) {
      const Piece& x = all[k];
      auto a = p.Arrive(x.trainer, x.index, x.last, 4, x.blocks);
      // A last piece may come before a higher-numbered one only in a broken client; this one
      // sends in any order, so such arrivals are refused and re-sent at the end.
      if (!a.ok()) {
        last_seen_early = true;
        all.push_back(x);
        ASSERT_LT(all.size(), 200u);
        continue;
      }
      arrived.insert({x.trainer, x.index});
      if (*a == Arrival::kComplete) complete.insert(x.trainer);
      for (const auto& r : p.TakeReady(ids)) {
        ASSERT_TRUE(returned.insert(r.block).second) << "seed " << seed;
        std::vector<std::string> senders;
        for (const auto& [t, piece] : r.senders) senders.push_back(t);
        std::vector<std::string> expected;
        for (const auto& t : ids) {
          if (sends[t].count(r.block) && p.samples(t) >= 0) {
            // it must have arrived already
            expected.push_back(t);
          } else {
            ASSERT_TRUE(complete.count(t)) << "seed " << seed << ": block " << r.block.block
                                           << " applied while trainer " << t << " may still send it";
          }
        }
        EXPECT_EQ(senders, expected) << "seed " << seed;
      }
    }
    (void)last_seen_early;
    ASSERT_EQ(complete.size(), ids.size()) << "seed " << seed;
    std::set<Block> sent;
    for (const auto& [t, s] : sends) sent.insert(s.begin(), s.end());
    EXPECT_EQ(returned, sent) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tessera
