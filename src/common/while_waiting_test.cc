// WhileWaiting: the work runs once, on the installing thread only, and scopes nest; only work that
// asks wants a progress word; and the wait for a reply written in place ends every way it can.
#include "common/while_waiting.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace tessera {
namespace {

TEST(WhileWaitingTest, RunsOnceOnTheThreadThatInstalledIt) {
  int runs = 0;
  WhileWaiting w([&](const WaitingCall&) { ++runs; });
  EXPECT_FALSE(w.ran());
  std::thread([] { WhileWaiting::RunHere({}); }).join();  // another thread: nothing of ours
  EXPECT_EQ(runs, 0);
  WhileWaiting::RunHere({});
  WhileWaiting::RunHere({});  // a retried call
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(w.ran());
}

TEST(WhileWaitingTest, NothingInstalledRunsNothing) {
  WhileWaiting::RunHere({});
  int runs = 0;
  {
    WhileWaiting w([&](const WaitingCall&) { ++runs; });
  }
  WhileWaiting::RunHere({});  // the scope ended
  EXPECT_EQ(runs, 0);
}

TEST(WhileWaitingTest, ACallTheWorkMakesRunsNothing) {
  int runs = 0;
  WhileWaiting w([&](const WaitingCall&) {
    ++runs;
    WhileWaiting::RunHere({});
  });
  WhileWaiting::RunHere({});
  EXPECT_EQ(runs, 1);
}

TEST(WhileWaitingTest, AnInnerScopeHidesTheOuterUntilItEnds) {
  int outer = 0, inner = 0;
  WhileWaiting o([&](const WaitingCall&) { ++outer; });
  {
    WhileWaiting i([&](const WaitingCall&) { ++inner; });
    WhileWaiting::RunHere({});
    WhileWaiting::RunHere({});
  }
  EXPECT_EQ(inner, 1);
  EXPECT_EQ(outer, 0);
  WhileWaiting::RunHere({});
  EXPECT_EQ(outer, 1);
}

// ReplyWrittenUpTo: true once the word reaches the place; false at once outside the room or
// without a word; false when the reply comes (the socket readable) short of it, or at the
// deadline, also after it has stopped spinning and sleeps for the reply.
TEST(WhileWaitingTest, AReplyWrittenUpToAPlaceIsWaitedForUntilTheReplyComesOrTheDeadline) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  std::atomic<uint64_t> word{0};
  char buffer[2000];  // the room is its first half: the places beyond it are still in the array
  char* room = buffer;
  WaitingCall call;
  call.reply_fd = fds[0];
  call.deadline = Now() + std::chrono::seconds(30);
  call.progress = &word;
  call.reply_base = room;
  call.reply_room = 1000;

  std::thread writer([&] {
    for (uint64_t w = 100; w <= 1000; w += 100) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      word.store(w, std::memory_order_release);
    }
  });
  EXPECT_TRUE(call.ReplyWrittenUpTo(room + 1000));
  writer.join();
  EXPECT_TRUE(call.ReplyWrittenUpTo(room + 1));
  EXPECT_FALSE(call.ReplyWrittenUpTo(room + 1001)) << "outside the room";
  EXPECT_FALSE(call.ReplyWrittenUpTo(room)) << "nothing before the room's start";
  WaitingCall none = call;
  none.progress = nullptr;
  EXPECT_FALSE(none.ReplyWrittenUpTo(room + 1));

  // The reply comes short of the place, after the wait has stopped spinning (kStillSpin).
  word = 10;
  const TimePoint start = Now();
  std::thread replier([&] {
    std::this_thread::sleep_for(WaitingCall::kStillSpin * 20);
    ASSERT_EQ(::write(fds[1], "r", 1), 1);
  });
  EXPECT_FALSE(call.ReplyWrittenUpTo(room + 500));
  replier.join();
  EXPECT_GE(Now() - start, WaitingCall::kStillSpin * 20);
  EXPECT_LT(Now() - start, std::chrono::seconds(20));

  // No reply, a deadline in 50 ms.
  char drain;
  ASSERT_EQ(::read(fds[0], &drain, 1), 1);
  call.deadline = Now() + std::chrono::milliseconds(50);
  EXPECT_FALSE(call.ReplyWrittenUpTo(room + 500));
  EXPECT_GE(Now(), call.deadline);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(WhileWaitingTest, OnlyWorkThatAsksWantsAProgressWord) {
  EXPECT_FALSE(WhileWaiting::WantsProgress());
  {
    WhileWaiting w([](const WaitingCall&) {});
    EXPECT_FALSE(WhileWaiting::WantsProgress());
  }
  WhileWaiting w([](const WaitingCall&) {}, /*wants_progress=*/true);
  EXPECT_TRUE(WhileWaiting::WantsProgress());
  std::thread([] { EXPECT_FALSE(WhileWaiting::WantsProgress()); }).join();
  WhileWaiting::RunHere({});
  EXPECT_FALSE(WhileWaiting::WantsProgress()) << "it ran";
}

}  // namespace
}  // namespace tessera
