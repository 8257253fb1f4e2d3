// DeferredCopies: a copy is done once, by the sender or by a writer's Flush, always with the
// values it was registered with; a dropped ticket cancels its copy; under threads, copies done
// outside the lock never see a later write.
#include "pserver/deferred_copies.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "job/wire_codec.h"

namespace tessera {
namespace {

TEST(DeferredCopiesTest, TheSenderCopiesOnceAndAFlushAfterDoesNothing) {
  DeferredCopies copies;
  std::vector<float> src = {1, 2, 3, 4}, dst(4, 0);
  auto t = copies.Add({{src.data(), dst.data(), 4}});
  EXPECT_EQ(copies.pending(), 1u);
  EXPECT_EQ(dst, (std::vector<float>{0, 0, 0, 0}));  // not yet
  t.Run();
  EXPECT_EQ(dst, src);
  EXPECT_EQ(copies.pending(), 0u);
  dst.assign(4, 9);
  copies.Flush();
  EXPECT_EQ(dst, (std::vector<float>{9, 9, 9, 9}));
}

// A pull in a wire format: its copy narrows as it goes, by the sender or by a writer's Flush, with
// the values it was registered with.
TEST(DeferredCopiesTest, ACopyMayNarrowTheValuesOnTheWay) {
  DeferredCopies copies;
  std::vector<float> src = {1.0f, -2.5f, 3.0f};
  std::vector<uint16_t> by_sender(3, 0), by_writer(3, 0);
  auto a = copies.Add({{src.data(), by_sender.data(), 3, NarrowFunction(wire::BFLOAT16)}});
  auto b = copies.Add({{src.data(), by_writer.data(), 3, NarrowFunction(wire::BFLOAT16)}});
  a.Run();
  copies.Flush();
  src = {7, 8, 9};
  b.Run();
  const std::vector<uint16_t> bf16 = {ToBfloat16(1.0f), ToBfloat16(-2.5f), ToBfloat16(3.0f)};
  EXPECT_EQ(by_sender, bf16);
  EXPECT_EQ(by_writer, bf16);
  EXPECT_EQ(NarrowFunction(wire::FLOAT32), nullptr) << "float32 is copied as it is";
}

// A reply made as it is sent (RunUpTo): each run makes the parts that begin before its end, in
// the order of their places whatever order they were given in; a writer's Flush makes the rest
// with the values they were registered with; a ticket dropped part way makes nothing more.
TEST(DeferredCopiesTest, ACopyMadeInRunsAsItsReplyGoesIsFinishedByAWriterOrCancelled) {
  DeferredCopies copies;
  std::vector<float> src = {1, 2, 3, 4, 5, 6};
  std::vector<float> out(6, 0), dropped(6, 0);
  // Parts given out of order: [4, 6), [0, 2), [2, 4).
  auto parts = [&](std::vector<float>& to) {
    return std::vector<DeferredCopies::Part>{
        {src.data() + 4, to.data() + 4, 2}, {src.data(), to.data(), 2}, {src.data() + 2, to.data() + 2, 2}};
  };
  auto t = copies.Add(parts(out));
  auto d = copies.Add(parts(dropped));
  t.RunUpTo(out.data() + 1);  // inside the first part: all of it
  EXPECT_EQ(out, (std::vector<float>{1, 2, 0, 0, 0, 0}));
  t.RunUpTo(out.data() + 2);  // where the second begins: not it
  EXPECT_EQ(out, (std::vector<float>{1, 2, 0, 0, 0, 0}));
  d.RunUpTo(dropped.data() + 3);
  EXPECT_EQ(dropped, (std::vector<float>{1, 2, 3, 4, 0, 0}));
  d = DeferredCopies::Ticket();  // the reply went nowhere: the rest is never made
  copies.Flush();                // a writer is about to change src
  src.assign(6, 9);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(dropped, (std::vector<float>{1, 2, 3, 4, 0, 0}));
  t.RunUpTo(out.data() + 6);
  t.Run();
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(copies.pending(), 0u);
}

TEST(DeferredCopiesTest, AWriterFlushesFirstAndTheReplyKeepsTheValuesItWasRegisteredWith) {
  DeferredCopies copies;
  std::vector<float> src = {1, 2}, a(2, 0), b(2, 0);
  auto ta = copies.Add({{src.data(), a.data(), 2}});
  auto tb = copies.Add({{src.data(), b.data(), 1}, {src.data() + 1, b.data() + 1, 1}});
  copies.Flush();  // a writer is about to change src
  src = {7, 8};
  ta.Run();
  tb.Run();
  EXPECT_EQ(a, (std::vector<float>{1, 2}));
  EXPECT_EQ(b, (std::vector<float>{1, 2}));
}

TEST(DeferredCopiesTest, ADroppedTicketCancelsItsCopy) {
  DeferredCopies copies;
  std::vector<float> src = {1, 2}, dst(2, 0);
  {
    auto t = copies.Add({{src.data(), dst.data(), 2}});
    DeferredCopies::Ticket moved = std::move(t);
    EXPECT_TRUE(t.empty());
  }
  EXPECT_EQ(copies.pending(), 0u);
  copies.Flush();
  EXPECT_EQ(dst, (std::vector<float>{0, 0}));
}

// Readers register a copy of a large block under the lock and do it after unlocking; a writer
// flushes under the lock and then bumps every element. Each copy must be uniform and equal to the
// version it was registered at.
TEST(DeferredCopiesTest, CopiesOutsideTheLockNeverSeeALaterWrite) {
  constexpr size_t kFloats = 1 << 16;
  std::mutex mu;
  DeferredCopies copies;
  std::vector<float> values(kFloats, 0.0f);
  int version = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, done{0};
  std::thread writer([&] {
    for (int i = 0; i < 2000 && !stop; ++i) {
      std::lock_guard<std::mutex> lock(mu);
      copies.Flush();
      ++version;
      for (auto& v : values) v += 1.0f;
    }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      std::vector<float> out(kFloats);
      for (int i = 0; i < 300; ++i) {
        DeferredCopies::Ticket t;
        int at;
        {
          std::lock_guard<std::mutex> lock(mu);
          at = version;
          t = copies.Add({{values.data(), out.data(), kFloats}});
        }
        t.Run();
        for (float v : out) {
          if (v != static_cast<float>(at)) {
            ++bad;
            break;
          }
        }
        ++done;
      }
    });
  }
  for (auto& t : readers) t.join();
  stop = true;
  writer.join();
  EXPECT_EQ(done.load(), 600);
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace tessera
