// Tests of ArrivingValues: which calls are staged, and the values handed out as each call's
// progress word says they are written (the words set by hand, as a pserver would).
#include "client/arriving_values.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <thread>

#include "common/clock.h"

namespace tessera {
namespace {

constexpr size_t kBlock = 16;  // floats a block
constexpr size_t kBlocks = 8;  // blocks of the model
constexpr size_t kFloats = kBlock * kBlocks;

// A model of kBlocks blocks in a window (values, then gradients), its staging area after them,
// and a step's calls to two pservers whose blocks alternate (pserver i holds blocks i, i + 2...).
struct TwoPservers {
  ShmWindow window;
  float* values = nullptr;
  float* grads = nullptr;
  ArrivingValues::Staging staging;
  std::vector<std::unique_ptr<LinkCall>> calls;

  explicit TwoPservers(int first_of_call1 = 1) {
    char* m = window.Allocate(4 * kFloats * sizeof(float)).value();
    values = reinterpret_cast<float*>(m);
    grads = values + kFloats;
    staging = {m + 2 * kFloats * sizeof(float), m + 3 * kFloats * sizeof(float), kFloats * sizeof(float)};
    std::iota(grads, grads + kFloats, 1000.0f);
    for (int i = 0; i < 2; ++i) calls.push_back(std::make_unique<LinkCall>());
    for (size_t b = 0; b < kBlocks; ++b) {
      LinkCall& c = *calls[b % 2 == static_cast<size_t>(first_of_call1 % 2) ? 1 : 0];
      c.payload.push_back({grads + b * kBlock, kBlock * sizeof(float)});
      c.reply.push_back({values + b * kBlock, kBlock * sizeof(float)});
    }
  }
  // What pserver i writes as its reply: block b's values are b + 0.5.
  void Write(int i, size_t blocks) {
    LinkCall& c = *calls[static_cast<size_t>(i)];
    auto* room = static_cast<float*>(c.reply[0].data);
    for (size_t k = 0; k < blocks; ++k) {
      const size_t b = 2 * k + static_cast<size_t>(i);
      std::fill(room + k * kBlock, room + (k + 1) * kBlock, static_cast<float>(b) + 0.5f);
    }
    c.reply[0].progress->store(blocks * kBlock * sizeof(float), std::memory_order_release);
  }
  const void* EndOfBlock(size_t b) const { return values + (b + 1) * kBlock; }
};

WaitingCall Elsewhere() {
  WaitingCall c;
  c.deadline = Now() + std::chrono::seconds(30);
  return c;
}

TEST(ArrivingValuesTest, AlternatingBlocksAreStagedAndEachCallIsToldInItsOwnWord) {
  TwoPservers t;
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->staged_calls(), 2);
  for (int i = 0; i < 2; ++i) {
    LinkCall& c = *t.calls[static_cast<size_t>(i)];
    ASSERT_EQ(c.reply.size(), 1u);
    ASSERT_EQ(c.payload.size(), 1u);
    EXPECT_EQ(c.reply[0].size, kBlocks / 2 * kBlock * sizeof(float));
    EXPECT_EQ(c.reply[0].progress, t.window.progress_slot(i));
    EXPECT_GE(WindowRunOf(t.window, std::span<const MutableBuffer>(c.reply)), 0);
    ASSERT_TRUE(c.before);
    ASSERT_TRUE(c.on_end);
    c.before(c);
    // The push is the call's blocks' gradients, in order.
    const auto* sent = static_cast<const float*>(c.payload[0].data);
    for (size_t k = 0; k < kBlocks / 2; ++k) {
      const size_t b = 2 * k + static_cast<size_t>(i);
      EXPECT_EQ(sent[k * kBlock], 1000.0f + static_cast<float>(b * kBlock)) << "call " << i << " block " << b;
    }
  }
  EXPECT_NE(t.calls[0]->payload[0].data, t.calls[1]->payload[0].data);
  EXPECT_NE(t.calls[0]->reply[0].data, t.calls[1]->reply[0].data);
}

TEST(ArrivingValuesTest, AWordStillHoldingTheStepBeforesCountSaysNothing) {
  TwoPservers t;
  // The words still hold the step before's counts (each call's reply written whole).
  for (int i = 0; i < 2; ++i) t.window.progress_slot(i)->store(kBlocks / 2 * kBlock * sizeof(float));
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  a->Ended(0);
  a->Ended(1);
  EXPECT_FALSE(a->WrittenUpTo(t.EndOfBlock(1), Elsewhere())) << "the step before's count";
  EXPECT_EQ(t.values[0], 0.0f);
}

TEST(ArrivingValuesTest, TheValuesComeAsEachCallHasWrittenThem) {
  TwoPservers t;
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  t.Write(0, 2);  // blocks 0 and 2
  t.Write(1, 1);  // block 1
  const WaitingCall here = Elsewhere();
  EXPECT_TRUE(a->WrittenUpTo(t.EndOfBlock(2), here));
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ(t.values[b * kBlock + 3], static_cast<float>(b) + 0.5f) << b;
  EXPECT_EQ(t.values[3 * kBlock], 0.0f) << "block 3 is not written yet";
  EXPECT_EQ(a->copied_ahead(), 3u);

  // Block 3 comes from call 1 a moment later: the wait sees it.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.Write(1, 2);
  });
  EXPECT_TRUE(a->WrittenUpTo(t.EndOfBlock(3), here));
  late.join();
  EXPECT_EQ(t.values[3 * kBlock], 3.5f);

  // Call 0 ends without writing block 4: nothing can tell.
  a->Ended(0);
  EXPECT_FALSE(a->WrittenUpTo(t.EndOfBlock(4), here));
}

TEST(ArrivingValuesTest, AStagedBlockIsCopiedAsFarAsItIsWrittenAndNeeded) {
  TwoPservers t;
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  auto* room0 = static_cast<float*>(t.calls[0]->reply[0].data);
  std::fill(room0, room0 + kBlock, 0.5f);  // block 0 whole in the room, told up to its half
  t.calls[0]->reply[0].progress->store(kBlock / 2 * sizeof(float));
  EXPECT_TRUE(a->WrittenUpTo(t.values + kBlock / 4, Elsewhere()));
  EXPECT_EQ(t.values[kBlock / 4 - 1], 0.5f);
  EXPECT_EQ(t.values[kBlock / 4], 0.0f) << "not needed yet";
  EXPECT_TRUE(a->WrittenUpTo(t.values + kBlock / 2, Elsewhere()));
  EXPECT_EQ(t.values[kBlock / 2 - 1], 0.5f);
  EXPECT_EQ(t.values[kBlock / 2], 0.0f) << "not told yet";
  EXPECT_EQ(a->copied_ahead(), 0u);
  a->Ended(0);
  a->Ended(1);
  EXPECT_FALSE(a->WrittenUpTo(t.values + kBlock / 2 + 1, Elsewhere()));
  t.Write(0, kBlocks / 2);
  t.Write(1, kBlocks / 2);
  a->Finish(/*ok=*/true, /*again=*/false);
  EXPECT_EQ(t.values[kBlock - 1], 0.5f) << "the rest, after the step";
  EXPECT_EQ(t.values[kBlock], 1.5f);
}

TEST(ArrivingValuesTest, FinishCopiesTheRestAndEverythingAgainAfterACallWasSentAnew) {
  TwoPservers t;
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  t.Write(0, kBlocks / 2);
  t.Write(1, kBlocks / 2);
  EXPECT_TRUE(a->WrittenUpTo(t.EndOfBlock(0), Elsewhere()));

  a->Finish(/*ok=*/false, false);
  EXPECT_EQ(t.values[5 * kBlock], 0.0f) << "a failed step copies nothing";

  auto* room0 = static_cast<float*>(t.calls[0]->reply[0].data);
  room0[0] = 42.0f;  // block 0 written anew (a retry), after the work copied it
  a->Finish(/*ok=*/true, /*again=*/false);
  for (size_t b = 1; b < kBlocks; ++b) EXPECT_EQ(t.values[b * kBlock], static_cast<float>(b) + 0.5f) << b;
  EXPECT_EQ(t.values[0], 0.5f) << "copied ahead, not again";
  a->Finish(/*ok=*/true, /*again=*/true);
  EXPECT_EQ(t.values[0], 42.0f);
}

TEST(ArrivingValuesTest, ACallInOneRunIsReadAsFarAsItHasComeWithoutACopy) {
  // Call 0 holds blocks 0..3, call 1 blocks 4..7: each fills one run of the model.
  TwoPservers t;
  for (auto& c : t.calls) {
    c->payload.clear();
    c->reply.clear();
  }
  for (size_t b = 0; b < kBlocks; ++b) {
    LinkCall& c = *t.calls[b < kBlocks / 2 ? 0 : 1];
    c.payload.push_back({t.grads + b * kBlock, kBlock * sizeof(float)});
    c.reply.push_back({t.values + b * kBlock, kBlock * sizeof(float)});
  }
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->staged_calls(), 0);
  EXPECT_FALSE(t.calls[0]->before) << "nothing to gather";
  EXPECT_EQ(t.calls[0]->reply.size(), kBlocks / 2) << "written in the model itself";
  EXPECT_EQ(t.calls[1]->reply[0].progress, t.window.progress_slot(1));
  // Half of block 4 written by call 1, which this thread runs: that much may be read.
  WaitingCall here = Elsewhere();
  here.progress = t.window.progress_slot(1);
  t.calls[0]->reply[0].progress->store(kBlocks / 2 * kBlock * sizeof(float));
  t.window.progress_slot(1)->store(kBlock / 2 * sizeof(float));
  EXPECT_TRUE(a->WrittenUpTo(t.values + 4 * kBlock + kBlock / 2, here));
  // Beyond it, and this thread's own call has ended (no reply socket): false at once.
  EXPECT_FALSE(a->WrittenUpTo(t.values + 4 * kBlock + kBlock / 2 + 1, here));
  EXPECT_EQ(a->copied_ahead(), 0u);
}

// A call that tells nothing (not placed in the window: a new connection's first call brings its
// region; or over TCP): the thread's own call, known by the word its caller gave, ends when its
// reply comes, not when Ended says so, which cannot come while the thread waits. Before, the work
// waited for itself until the deadline (an ssh job mixing shm and tcp stalled at 0 tasks).
TEST(ArrivingValuesTest, ACallOfThisThreadThatTellsNothingEndsWithItsReply) {
  TwoPservers t;
  auto a = ArrivingValues::Track(t.calls, t.window, t.staging);
  ASSERT_NE(a, nullptr);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "r", 1), 1);  // the reply has come
  WaitingCall here;
  here.reply_fd = fds[0];
  here.deadline = Now() + std::chrono::seconds(20);
  here.caller_word = t.calls[0]->reply[0].progress;
  const TimePoint start = Now();
  EXPECT_FALSE(a->WrittenUpTo(t.EndOfBlock(0), here));
  EXPECT_LT(Now() - start, std::chrono::seconds(10)) << "waited for its own end";
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(ArrivingValuesTest, WhatCannotBeTrackedIsLeftAsItWas) {
  {
    TwoPservers t;
    t.calls[1]->reply.clear();  // one call pulls: its own word does
    EXPECT_EQ(ArrivingValues::Track(t.calls, t.window, t.staging), nullptr);
    EXPECT_EQ(t.calls[0]->reply.size(), kBlocks / 2);
    EXPECT_FALSE(t.calls[0]->on_end);
  }
  {
    TwoPservers t;
    std::vector<float> outside(kBlock);
    t.calls[1]->reply.push_back({outside.data(), outside.size() * sizeof(float)});
    EXPECT_EQ(ArrivingValues::Track(t.calls, t.window, t.staging), nullptr);
    EXPECT_EQ(t.calls[0]->reply.size(), kBlocks / 2);
  }
  {
    TwoPservers t;
    ArrivingValues::Staging small = t.staging;
    small.bytes = kBlock * sizeof(float);
    EXPECT_EQ(ArrivingValues::Track(t.calls, t.window, small), nullptr) << "no room to stage";
    EXPECT_EQ(t.calls[1]->reply.size(), kBlocks / 2);
  }
}

}  // namespace
}  // namespace tessera
