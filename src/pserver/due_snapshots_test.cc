// DueSnapshots: order, the bound on waiting copies, and a reply's wait for room (woken by a take,
// by a stop, or given up after its limit).
#include "pserver/due_snapshots.h"

#include <gtest/gtest.h>

#include <thread>

namespace tessera {
namespace {

Checkpoint At(int64_t version) {
  Checkpoint c;
  c.version = version;
  return c;
}

TEST(DueSnapshotsTest, TakenInTheOrderAdded) {
  DueSnapshots due(0, {});
  EXPECT_FALSE(due.Take().has_value());
  for (int64_t v : {10, 20, 30}) due.Add(At(v));
  EXPECT_EQ(due.size(), 3u);
  for (int64_t v : {10, 20, 30}) {
    auto c = due.Take();
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->version, v);
  }
  EXPECT_EQ(due.size(), 0u);
  EXPECT_FALSE(due.Take().has_value());
}

TEST(DueSnapshotsTest, BeyondKeepTheOldestIsDropped) {
  DueSnapshots due(0, {.room = 1, .keep = 3});
  for (int64_t v = 1; v <= 5; ++v) due.Add(At(v));
  EXPECT_EQ(due.size(), 3u);
  EXPECT_EQ(due.Take()->version, 3);  // 1 and 2 went
}

TEST(DueSnapshotsTest, WithRoomNoWait) {
  std::atomic<bool> serving{true};
  DueSnapshots due(0, {.room = 1, .keep = 4, .wait = std::chrono::hours(1)});
  EXPECT_TRUE(due.WaitForRoom(serving));
  due.Add(At(1));
  EXPECT_TRUE(due.WaitForRoom(serving));  // one may wait
}

TEST(DueSnapshotsTest, AReplyWaitsUntilTheCheckpointThreadTakesOne) {
  std::atomic<bool> serving{true};
  DueSnapshots due(0, {.room = 1, .keep = 4, .wait = std::chrono::hours(1)});
  due.Add(At(1));
  due.Add(At(2));
  std::atomic<bool> returned{false};
  std::thread reply([&] {
    EXPECT_TRUE(due.WaitForRoom(serving));
    returned = true;
  });
  // Not asserted as a timing: whether or not the reply is already waiting, it may only return once
  // a copy is taken.
  EXPECT_FALSE(returned.load());
  ASSERT_TRUE(due.Take().has_value());
  reply.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(due.size(), 1u);
}

TEST(DueSnapshotsTest, AStopReleasesTheWaitingReplies) {
  std::atomic<bool> serving{true};
  DueSnapshots due(0, {.room = 0, .keep = 4, .wait = std::chrono::hours(1)});
  due.Add(At(1));
  std::thread reply([&] { EXPECT_TRUE(due.WaitForRoom(serving)); });
  serving = false;
  due.Wake();
  reply.join();  // a lost wake-up would hang here (and the test with it)
  EXPECT_EQ(due.size(), 1u);
}

TEST(DueSnapshotsTest, TheWaitEndsAtItsLimit) {
  std::atomic<bool> serving{true};
  DueSnapshots due(0, {.room = 0, .keep = 4, .wait = std::chrono::milliseconds(20)});
  due.Add(At(1));
  EXPECT_FALSE(due.WaitForRoom(serving));
  EXPECT_EQ(due.size(), 1u);  // nothing dropped by the wait
}

}  // namespace
}  // namespace tessera
