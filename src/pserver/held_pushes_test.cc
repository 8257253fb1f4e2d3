// HeldPushes: the held count and who opened the step, samples, borrowed gradients copied only when
// still needed, pieces marked spent, and lists that still read their own segments after the
// pieces move.
#include "pserver/held_pushes.h"

#include <gtest/gtest.h>

#include <cstring>

#include "pserver/one_shard_for_tests.h"

namespace tessera {
namespace {

class HeldPushesTest : public OneShardTest {
 protected:
  // Holds piece `index` of `trainer`'s push of "w" blocks `blocks` (10 floats each, block 2: 5),
  // with gradients `value` borrowed from `buffer`.
  bool HoldBlocks(HeldPushes& held, const std::string& trainer, int index, std::vector<int64_t> blocks,
                  std::vector<float>& buffer, float value, bool counted, bool sparse = false) {
    google::protobuf::RepeatedPtrField<wire::Segment> segs;
    for (int64_t b : blocks) {
      auto* s = segs.Add();
      s->set_param("w");
      s->set_block(b);
      s->set_count(b == 2 ? 5 : 10);
    }
    if (sparse) {
      auto* s = segs.Add();
      s->set_param("emb");
      s->set_block(-1);
      s->set_count(1);
      s->add_keys(9);
    }
    auto list = SegmentList::Read(store_, segs, SegmentList::Use::kPush);
    EXPECT_TRUE(list.ok()) << list.status().message();
    buffer.assign(list->bytes() / sizeof(float), value);
    return held.Hold(trainer, index, 4, &segs, std::move(*list),
                     {buffer.data(), buffer.size() * sizeof(float)}, counted);
  }
};

TEST_F(HeldPushesTest, TheFirstCountedPushOpensTheStepAndReleaseEndsIt) {
  HeldPushes held;
  std::vector<float> a, b, c;
  EXPECT_FALSE(HoldBlocks(held, "t0", 0, {0}, a, 1, /*counted=*/false));  // a piece kept: not yet
  EXPECT_EQ(held.held(), 0);
  EXPECT_TRUE(HoldBlocks(held, "t0", 1, {1}, b, 2, true));
  EXPECT_FALSE(HoldBlocks(held, "t1", 0, {0, 1}, c, 3, true));
  EXPECT_EQ(held.held(), 2);
  EXPECT_FALSE(held.HoldEmpty("t1"));  // already counted
  EXPECT_EQ(held.held(), 2);
  EXPECT_EQ(held.of("t1").used, 0);  // its pieces went
  EXPECT_EQ(held.of("t1").samples, 0);
  const std::vector<std::string> both = {"t0", "t1", "gone"};
  EXPECT_EQ(held.Samples(both), 4);
  held.Release(both);
  EXPECT_EQ(held.held(), 0);
  EXPECT_TRUE(held.HoldEmpty("t2"));  // the next step's first
  EXPECT_EQ(held.of("nobody").used, 0);
}

TEST_F(HeldPushesTest, ListsReadTheirOwnSegmentsAfterThePiecesMove) {
  HeldPushes held;
  std::vector<float> p0, p5;
  HoldBlocks(held, "t0", 0, {2}, p0, 1, false);
  HoldBlocks(held, "t0", 5, {1}, p5, 2, true);  // grows the pieces: piece 0 moves
  const auto& push = held.of("t0");
  ASSERT_EQ(push.used, 6);
  EXPECT_TRUE(push.pieces[0].present);
  EXPECT_FALSE(push.pieces[3].present);
  const auto& list = push.pieces[0].list;
  ASSERT_EQ(list.parts().size(), 1u);
  EXPECT_EQ(list.segment(list.parts()[0]).block(), 2);
  EXPECT_EQ(push.pieces[0].data()[0], 1.0f);
  EXPECT_EQ(push.pieces[5].data()[9], 2.0f);
}

TEST_F(HeldPushesTest, BorrowedGradientsAreCopiedOnlyWhenStillNeeded) {
  HeldPushes held;
  std::vector<float> a, b;
  HoldBlocks(held, "t0", 0, {0}, a, 1, false);
  HoldBlocks(held, "t0", 1, {1}, b, 2, false, /*sparse=*/true);
  // Block 0 was applied early: piece 0 is spent; piece 1 holds a sparse row, never spent.
  held.MarkSpent([](const std::string& param, int64_t block) { return param == "w" && block <= 1; });
  EXPECT_TRUE(held.of("t0").pieces[0].spent);
  EXPECT_FALSE(held.of("t0").pieces[1].spent);
  held.KeepBorrowed("t0");
  a.assign(a.size(), -1);  // the request's buffers are gone
  b.assign(b.size(), -1);
  EXPECT_TRUE(held.of("t0").pieces[0].payload.empty());  // spent: not copied
  EXPECT_EQ(held.of("t0").pieces[1].data()[0], 2.0f);    // copied before the buffer changed
  held.Clear();
  EXPECT_EQ(held.of("t0").used, 0);
}

// A push decoded from a wire format is in the handling thread's buffer: the held piece takes that
// buffer (no copy) and gives back the one it had, which the thread reuses.
TEST_F(HeldPushesTest, APieceInTheThreadsDecodedBufferTakesItInsteadOfACopy) {
  HeldPushes held;
  std::vector<float> unused;
  HoldBlocks(held, "t0", 0, {0}, unused, 3, false);  // piece 0 held from a buffer of its own...
  std::string owned(reinterpret_cast<const char*>(unused.data()), unused.size() * sizeof(float));
  held.Release(std::vector<std::string>{"t0"});
  HoldBlocks(held, "t0", 0, {0}, unused, 0, false);
  // ... now borrowing `owned` (what Widen wrote), whose memory is the piece's from here on.
  auto& piece = const_cast<HeldPushes::Piece&>(held.of("t0").pieces[0]);
  piece.borrowed = owned.data();
  piece.borrowed_size = owned.size();
  const char* memory = owned.data();
  held.KeepBorrowed("t0", &owned);
  EXPECT_EQ(held.of("t0").pieces[0].payload.data(), memory) << "taken, not copied";
  EXPECT_EQ(held.of("t0").pieces[0].data()[3], 3.0f);
  EXPECT_NE(owned.data(), memory);
}

// Step after step, the thread's decoded buffer and the piece's trade places, and the one the
// thread gets back still has the size of the push it held: the next decoding resizes it to the
// same size, which writes nothing (an emptied buffer had tens of MB zeroed at every push).
TEST_F(HeldPushesTest, TheBufferGivenBackKeepsItsSizeForTheNextDecoding) {
  HeldPushes held;
  std::vector<float> unused;
  std::string owned;
  const char* before = nullptr;
  for (int step = 0; step < 3; ++step) {
    HoldBlocks(held, "t0", 0, {0}, unused, static_cast<float>(step), false);
    owned.resize(unused.size() * sizeof(float));  // what Widen does, then writes the values
    std::memcpy(owned.data(), unused.data(), owned.size());
    auto& piece = const_cast<HeldPushes::Piece&>(held.of("t0").pieces[0]);
    piece.borrowed = owned.data();
    piece.borrowed_size = owned.size();
    const char* memory = owned.data();
    held.KeepBorrowed("t0", &owned);
    EXPECT_EQ(held.of("t0").pieces[0].payload.data(), memory) << step;
    EXPECT_EQ(held.of("t0").pieces[0].data()[9], static_cast<float>(step)) << step;
    if (step > 0) {
      EXPECT_EQ(owned.data(), before) << "the piece's buffer of the step before, at step " << step;
      EXPECT_EQ(owned.size(), 10 * sizeof(float)) << step;
    }
    before = memory;
    held.Release(std::vector<std::string>{"t0"});
  }
}

TEST_F(HeldPushesTest, DropForgetsOneTrainersPieces) {
  HeldPushes held;
  std::vector<float> a, b;
  HoldBlocks(held, "t0", 0, {0}, a, 1, false);
  HoldBlocks(held, "t1", 0, {0}, b, 1, false);
  held.Drop("t0");
  held.Drop("never");
  EXPECT_EQ(held.of("t0").used, 0);
  EXPECT_EQ(held.of("t1").used, 1);
}

}  // namespace
}  // namespace tessera
