// SpinGovernor's rules, exhaustively; and SpinUntilReadable stepping aside for real: after its
// spins keep running out, and after another thread takes its core.
#include "transport/spin_governor.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "transport/stream_io.h"

namespace tessera {
namespace {

using std::chrono::microseconds;

const SpinOutcome kArrived{microseconds(3), true, false};
const SpinOutcome kRanOut{microseconds(3), false, true};
const SpinOutcome kLost{SpinGovernor::kLostCore, false, false};

// Waits that may not spin before one that may (bounded).
int SleepsBeforeSpinning(SpinGovernor& g) {
  int n = 0;
  while (!g.MaySpin() && n < 1'000'000) ++n;
  return n;
}

TEST(SpinGovernorTest, SpinsWhileSpinsGoWell) {
  SpinGovernor g;
  for (int i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(g.MaySpin());
    g.Record(i % 3 == 0 ? SpinOutcome{SpinGovernor::kLostCore - microseconds(1), true, false} : kArrived);
  }
  EXPECT_EQ(g.back_offs(), 0);
  // A spin cut short by other work (neither arrived nor ran out) changes nothing either.
  g.Record(SpinOutcome{});
  EXPECT_TRUE(g.MaySpin());
}

TEST(SpinGovernorTest, ALostCoreSleepsTheNextWaitsTwiceAsManyEachTime) {
  SpinGovernor g;
  g.Record(kLost);
  EXPECT_EQ(g.back_offs(), 1);
  EXPECT_EQ(SleepsBeforeSpinning(g), SpinGovernor::kFirstBackOff);
  g.Record(kLost);
  EXPECT_EQ(SleepsBeforeSpinning(g), 2 * SpinGovernor::kFirstBackOff);
  for (int i = 0; i < 20; ++i) {
    g.Record(kLost);
    ASSERT_LE(SleepsBeforeSpinning(g), SpinGovernor::kMaxBackOff);
  }
  EXPECT_EQ(g.next_back_off(), SpinGovernor::kMaxBackOff);
  EXPECT_EQ(g.back_offs(), 22);
}

TEST(SpinGovernorTest, SpinsThatKeepRunningOutBackOff) {
  SpinGovernor g;
  for (int i = 0; i < SpinGovernor::kRunOutsInARow - 1; ++i) g.Record(kRanOut);
  g.Record(kArrived);  // one arrival starts the count again
  for (int i = 0; i < SpinGovernor::kRunOutsInARow - 1; ++i) {
    g.Record(kRanOut);
    ASSERT_TRUE(g.MaySpin());
  }
  EXPECT_EQ(g.back_offs(), 0);
  g.Record(kRanOut);
  EXPECT_EQ(g.back_offs(), 1);
  EXPECT_EQ(SleepsBeforeSpinning(g), SpinGovernor::kFirstBackOff);
  // After the back-off, a run of run-outs starts from zero.
  for (int i = 0; i < SpinGovernor::kRunOutsInARow - 1; ++i) g.Record(kRanOut);
  EXPECT_EQ(g.back_offs(), 1);
}

TEST(SpinGovernorTest, LongRunsOfGoodSpinsForgiveSlowly) {
  SpinGovernor g;
  for (int i = 0; i < 4; ++i) g.Record(kLost);  // next back-off: 16 x the first
  (void)SleepsBeforeSpinning(g);
  ASSERT_EQ(g.next_back_off(), 16 * SpinGovernor::kFirstBackOff);
  for (int i = 0; i < SpinGovernor::kForgiveAfter - 1; ++i) g.Record(kArrived);
  EXPECT_EQ(g.next_back_off(), 16 * SpinGovernor::kFirstBackOff) << "not yet";
  g.Record(kRanOut);  // breaks the run
  for (int i = 0; i < SpinGovernor::kForgiveAfter - 1; ++i) g.Record(kArrived);
  EXPECT_EQ(g.next_back_off(), 16 * SpinGovernor::kFirstBackOff);
  g.Record(kArrived);
  EXPECT_EQ(g.next_back_off(), 8 * SpinGovernor::kFirstBackOff);
  for (int i = 0; i < 100 * SpinGovernor::kForgiveAfter; ++i) g.Record(kArrived);
  EXPECT_EQ(g.next_back_off(), SpinGovernor::kFirstBackOff) << "never below the first";
  EXPECT_TRUE(g.MaySpin());
}

TEST(SpinSummaryTest, SaysNothingWithoutPollingAndCountsWhatItDid) {
  EXPECT_EQ(SpinSummary({}), "");
  EXPECT_EQ(SpinSummary({1880, 0, 0}), "busy polling: 1880 waits spun, 0 slept at once (0 back-offs)");
  EXPECT_EQ(SpinSummary({878, 64, 1}), "busy polling: 878 waits spun, 64 slept at once (1 back-off)");
  EXPECT_EQ(SpinSummary({0, 5, 2}), "busy polling: 0 waits spun, 5 slept at once (2 back-offs)");
}

// The process's governor, for real: spins on a socket nobody writes to until one backs off (at
// most kRunOutsInARow spins of 1 ms, or sooner if the machine took the core), then the next wait
// sleeps at once. Bounded: waits that sleep at once return at once.
TEST(SpinUntilReadableTest, StepsAsideWhenItsSpinsRunOut) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  const SpinCounters before = SpinCountersNow();
  for (int i = 0; i < 100'000 && SpinCountersNow().back_offs == before.back_offs; ++i)
    SpinUntilReadable(sv[0], std::chrono::milliseconds(1));
  const SpinCounters after = SpinCountersNow();
  EXPECT_EQ(after.back_offs, before.back_offs + 1);
  EXPECT_LE(after.spins - before.spins, SpinGovernor::kRunOutsInARow);
  SpinUntilReadable(sv[0], std::chrono::milliseconds(1));
  EXPECT_EQ(SpinCountersNow().skipped, after.skipped + 1) << "the next wait sleeps at once";
  ::close(sv[0]);
  ::close(sv[1]);
}

// Another thread busy on the spinner's only CPU: the spinner's yields hand it the core, the
// spinner sees it lost the core and backs off at its first spin.
TEST(SpinUntilReadableTest, StepsAsideWhenAnotherThreadNeedsTheCore) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
  cpu_set_t old;
  ASSERT_EQ(sched_getaffinity(0, sizeof old, &old), 0);
  if (sched_setaffinity(0, sizeof one, &one) != 0) GTEST_SKIP() << "cannot pin threads here";
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  // Out of any back-off left by another test: waits that sleep at once return at once.
  for (int i = 0; i < 100'000; ++i) {
    const int64_t skipped = SpinCountersNow().skipped;
    SpinUntilReadable(sv[0], microseconds(1));
    if (SpinCountersNow().skipped == skipped) break;
  }
  std::atomic<bool> stop{false};
  std::thread hog([&] {
    (void)sched_setaffinity(0, sizeof one, &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const SpinCounters before = SpinCountersNow();
  SpinUntilReadable(sv[0], std::chrono::milliseconds(500));
  const SpinCounters after = SpinCountersNow();
  stop = true;
  hog.join();
  (void)sched_setaffinity(0, sizeof old, &old);
  EXPECT_EQ(after.spins, before.spins + 1);
  EXPECT_EQ(after.back_offs, before.back_offs + 1) << "the hog took the core: the spin backs off";
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(SpinUntilReadableTest, AMessageEndsTheSpinAtOnce) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  ASSERT_EQ(::write(sv[1], "x", 1), 1);
  for (int i = 0; i < 100'000; ++i) {  // out of any back-off first
    const int64_t spins = SpinCountersNow().spins;
    SpinUntilReadable(sv[0], std::chrono::seconds(60));
    if (SpinCountersNow().spins != spins) break;
  }
  char c = 0;
  EXPECT_EQ(::read(sv[0], &c, 1), 1) << "the spin returned with the message there";
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace
}  // namespace tessera
