// A task queue that follows a growing data set: new chunks become tasks handed out in order, the
// pass waits for more instead of ending, a stop lets it finish, and all of it survives snapshots
// and event replay; under random trainers, failures and timeouts every chunk is done exactly once.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/bytes.h"
#include "master/events.h"
#include "master/task_queue.h"

namespace tessera::master {
namespace {

TaskQueueOptions Following(int64_t chunks) {
  TaskQueueOptions o;
  o.chunks = chunks;
  o.chunk_records.assign(chunks, 100);
  o.follow = true;
  o.seed = 9;
  o.timeout_ms = 1000;
  return o;
}

// Hands out and finishes everything there is now; returns the chunks in the order handed out.
std::vector<int64_t> DrainAll(TaskQueue& q) {
  std::vector<int64_t> chunks;
  for (int i = 0; i < 10000; ++i) {
    auto n = q.Dispatch("t", 0);
    if (n.kind != TaskQueue::NextKind::kTask) break;
    chunks.push_back(n.task.first_chunk);
    EXPECT_TRUE(q.Finish(n.task.task, n.task.epoch));
  }
  return chunks;
}

TEST(TaskQueueFollowTest, NewChunksAreHandedOutInOrderAndThePassWaitsUntilStopped) {
  TaskQueue q(Following(4));
  auto first = DrainAll(q);
  EXPECT_EQ(first.size(), 4u);
  // Everything done, but the queue follows: it waits rather than finishing.
  EXPECT_FALSE(q.finished());
  EXPECT_EQ(q.Dispatch("t", 0).kind, TaskQueue::NextKind::kWait);
  ASSERT_TRUE(q.AddChunks({50, 60, 70}).ok());
  EXPECT_EQ(q.chunks(), 7);
  EXPECT_EQ(q.tasks(), 7);
  auto n = q.Dispatch("t", 0);
  ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
  EXPECT_EQ(n.task.first_chunk, 4);  // in the order they landed
  EXPECT_EQ(n.task.chunks, 1);
  EXPECT_EQ(n.task.pass, 0);
  ASSERT_TRUE(q.Finish(n.task.task, n.task.epoch));
  EXPECT_EQ(DrainAll(q), (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(q.finished());
  // A stop with nothing left finishes the queue at once.
  q.StopFollowing();
  EXPECT_TRUE(q.finished());
  EXPECT_EQ(q.Dispatch("t", 0).kind, TaskQueue::NextKind::kFinished);
  EXPECT_EQ(q.AddChunks({1}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(q.counts().done, 7);
}

TEST(TaskQueueFollowTest, AStopWithTasksOutFinishesWhenTheyAreDone) {
  TaskQueue q(Following(2));
  auto a = q.Dispatch("a", 0);
  auto b = q.Dispatch("b", 0);
  q.StopFollowing();
  EXPECT_FALSE(q.finished());
  EXPECT_EQ(q.AddChunks({5}).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(q.Finish(a.task.task, a.task.epoch));
  ASSERT_TRUE(q.Fail(b.task.task, b.task.epoch, "crashed"));  // back in line
  auto again = q.Dispatch("a", 0);
  ASSERT_EQ(again.kind, TaskQueue::NextKind::kTask);
  ASSERT_TRUE(q.Finish(again.task.task, again.task.epoch));
  EXPECT_TRUE(q.finished());
}

TEST(TaskQueueFollowTest, OnlyAQueueThatFollowsTakesChunksAndItHasOnePassAndNoSplits) {
  TaskQueueOptions plain = Following(2);
  plain.follow = false;
  TaskQueue q(plain);
  EXPECT_EQ(q.AddChunks({1}).code(), StatusCode::kFailedPrecondition);
  TaskQueueOptions two = Following(2);
  two.passes = 2;
  EXPECT_EQ(two.Validate().code(), StatusCode::kInvalidArgument);
  TaskQueueOptions split = Following(2);
  split.split_min_records = 10;
  EXPECT_EQ(split.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Following(2).Validate().ok());
  TaskQueue f(Following(2));
  EXPECT_EQ(f.AddChunks({3, -1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.tasks(), 2);  // nothing added
}

TEST(TaskQueueFollowTest, AddedChunksAndTheStopSurviveASnapshotAndTheEventLog) {
  TaskQueue q(Following(3));
  auto a = q.Dispatch("a", 0);
  ASSERT_TRUE(q.AddChunks({10, 20}).ok());
  auto b = q.Dispatch("b", 0);
  // A snapshot now restores the added tasks, the pending ones and the following.
  auto restored = TaskQueue::Restore(Following(3), q.Snapshot());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->Snapshot(), q.Snapshot());
  EXPECT_TRUE(restored->following());
  EXPECT_EQ(restored->chunks(), 5);
  // The same from the event log: a queue at the start, replaying what happened.
  std::vector<Event> log = {{Event::Type::kDispatch, "a", a.task.task, a.task.epoch}};
  Event add{Event::Type::kAddChunks};
  add.chunk_records = {10, 20};
  log.push_back(add);
  log.push_back({Event::Type::kDispatch, "b", b.task.task, b.task.epoch});
  log.push_back({Event::Type::kStopFollowing});
  q.StopFollowing();
  std::string delta;
  ByteWriter w(&delta);
  w.PutVarint(log.size());
  for (const auto& e : log) w.PutString(EncodeEvent(e));
  auto events = DecodeDelta(delta);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[1].chunk_records, (std::vector<int64_t>{10, 20}));
  TaskQueue replayed(Following(3));
  for (const auto& e : *events) ASSERT_TRUE(Replay(replayed, e, 0).ok());
  EXPECT_EQ(replayed.Snapshot(), q.Snapshot());
  EXPECT_FALSE(replayed.following());
  // A queue that does not follow still writes the snapshot it always did (TSQ1).
  TaskQueueOptions plain = Following(3);
  plain.follow = false;
  TaskQueue p(plain);
  auto back = TaskQueue::Restore(plain, p.Snapshot());
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->options().follow);
}

// Random trainers take, finish, fail and drop tasks (and time out) while chunks keep landing,
// with the queue snapshotted and restored now and then: at the stop every chunk's task is done
// exactly once (a finish is accepted once per task; failures and timeouts hand it out again).
TEST(TaskQueueFollowTest, UnderRandomFaultsEveryChunkIsDoneExactlyOnce) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    TaskQueueOptions o = Following(5);
    o.max_failures = 1000;
    auto q = std::make_unique<TaskQueue>(o);
    std::map<int64_t, int> finished;  // task -> accepted finishes
    std::vector<TaskQueue::Dispatched> out;
    int64_t now = 0;
    for (int step = 0; step < 3000 && !q->finished(); ++step) {
      now += 10;
      switch (rng() % 8) {
        case 0:
          if (q->following() && q->chunks() < 200) {
            ASSERT_TRUE(q->AddChunks({int64_t(rng() % 500)}).ok());
          }
          break;
        case 1:
        case 2: {
          auto n = q->Dispatch("t" + std::to_string(rng() % 4), now);
          if (n.kind == TaskQueue::NextKind::kTask) out.push_back(n.task);
          break;
        }
        case 3:
        case 4:
          if (!out.empty()) {
            size_t i = rng() % out.size();
            if (q->Finish(out[i].task, out[i].epoch)) ++finished[out[i].task];
            out.erase(out.begin() + static_cast<long>(i));
          }
          break;
        case 5:
          if (!out.empty() && rng() % 3 == 0) {
            size_t i = rng() % out.size();
            (void)q->Fail(out[i].task, out[i].epoch, "crash");
            out.erase(out.begin() + static_cast<long>(i));
          }
          break;
        case 6:
          for (auto [t, e] : q->Overdue(now - 500)) (void)q->Expire(t, e);
          break;
        case 7: {
          auto r = TaskQueue::Restore(o, q->Snapshot());
          ASSERT_TRUE(r.ok()) << r.status();
          q = std::make_unique<TaskQueue>(std::move(*r));
          q->ResetDeadlines(now);
          break;
        }
      }
      if (step == 2000) q->StopFollowing();
    }
    // Whatever is still out is finished (trainers that come back).
    for (int guard = 0; guard < 100000 && !q->finished(); ++guard) {
      for (const auto& d : out)
        if (q->Finish(d.task, d.epoch)) ++finished[d.task];
      out.clear();
      auto n = q->Dispatch("late", now);
      if (n.kind == TaskQueue::NextKind::kTask) out.push_back(n.task);
    }
    ASSERT_TRUE(q->finished());
    ASSERT_EQ(static_cast<int64_t>(finished.size()), q->tasks());
    for (const auto& [task, n] : finished) ASSERT_EQ(n, 1) << "task " << task;
    EXPECT_EQ(q->counts().done, q->tasks());
  }
}

}  // namespace
}  // namespace tessera::master
