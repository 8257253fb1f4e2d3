#include "master/task_queue.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <map>
#include <optional>
#include <random>
#include <set>

namespace tessera::master {
namespace {

TaskQueueOptions Opts(int64_t chunks, int per_task = 1, int passes = 1, int max_failures = 2) {
  TaskQueueOptions o;
  o.chunks = chunks;
  o.chunks_per_task = per_task;
  o.passes = passes;
  o.max_failures = max_failures;
  o.timeout_ms = 1000;
  o.seed = 42;
  return o;
}

TEST(TaskQueueTest, EveryTaskOncePerPassInAShuffledOrderAndChunksGroupedByTask) {
  TaskQueue q(Opts(10, 3));
  EXPECT_EQ(q.tasks(), 4);
  std::vector<int64_t> order;
  int64_t chunks = 0;
  for (int i = 0; i < 4; ++i) {
    auto n = q.Dispatch("t0", 0);
    ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
    order.push_back(n.task.task);
    EXPECT_EQ(n.task.first_chunk, n.task.task * 3);
    chunks += n.task.chunks;
  }
  EXPECT_EQ(chunks, 10);  // the last task has the single leftover chunk
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 4u);
  EXPECT_EQ(q.Dispatch("t0", 0).kind, TaskQueue::NextKind::kWait);  // all pending
}

// A dispatch whose answer never reached its trainer (the call timed out there, or the master died
// before answering) is handed to it again when it asks next and does not list the task, as it
// was: same epoch, same records. Before, the task stayed pending until its timeout, and at a
// pass's end every trainer waited for it.
TEST(TaskQueueTest, ATaskWhoseAnswerWasLostIsHandedToItsTrainerAgain) {
  TaskQueue q(Opts(6, 1, 1));
  const auto a = q.Dispatch("t0", 0);     // received
  const auto lost = q.Dispatch("t0", 0);  // its answer lost
  const auto other = q.Dispatch("t1", 0);
  ASSERT_EQ(lost.kind, TaskQueue::NextKind::kTask);
  const std::set<std::pair<int64_t, int64_t>> held = {{a.task.task, a.task.epoch}};
  auto again = q.Undelivered("t0", held, 500);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->task, lost.task.task);
  EXPECT_EQ(again->epoch, lost.task.epoch) << "the same dispatch: its acknowledgement is accepted";
  EXPECT_EQ(again->first_chunk, lost.task.first_chunk);
  EXPECT_EQ(again->chunks, lost.task.chunks);
  EXPECT_EQ(again->deadline_ms, 1500) << "a fresh deadline";
  EXPECT_TRUE(q.Overdue(1200).size() == 2u) << "the two others are overdue at 1200, not the one handed again";
  // Held by another trainer, or listed: not handed again.
  EXPECT_FALSE(q.Undelivered("t1", {{other.task.task, other.task.epoch}}, 0).has_value());
  EXPECT_FALSE(q.Undelivered("t2", {}, 0).has_value());
  EXPECT_FALSE(q.Undelivered("t0", {{a.task.task, a.task.epoch}, {lost.task.task, lost.task.epoch}}, 0));
  // A stale epoch in the list does not hide the current dispatch.
  EXPECT_TRUE(q.Undelivered("t0", {{a.task.task, a.task.epoch}, {lost.task.task, lost.task.epoch - 100}}, 0));
  // Done: nothing to hand again; the counts never saw a second dispatch.
  EXPECT_TRUE(q.Finish(lost.task.task, lost.task.epoch));
  EXPECT_FALSE(q.Undelivered("t0", held, 0).has_value());
  EXPECT_EQ(q.stats().dispatches, 3);
  EXPECT_EQ(q.stats().duplicates, 0);
}

// Readers fetch their next task ahead. With four tasks and three trainers, two readers fetching
// ahead could hold every task while the third trains nothing: a trainer that already holds a task
// waits while the tasks left are no more than the live trainers holding none.
TEST(TaskQueueTest, ATrainerFetchingAheadWaitsWhileOthersHaveNoTask) {
  TaskQueue q(Opts(4));
  const std::set<std::string> live = {"t0", "t1", "t2"};
  EXPECT_FALSE(q.HoldBackAhead("t1", live)) << "holds nothing: never held back";
  ASSERT_EQ(q.Dispatch("t1", 0).kind, TaskQueue::NextKind::kTask);
  EXPECT_FALSE(q.HoldBackAhead("t1", live)) << "3 left for 2 trainers without a task: one to spare";
  ASSERT_EQ(q.Dispatch("t1", 0).kind, TaskQueue::NextKind::kTask);
  ASSERT_EQ(q.Dispatch("t2", 0).kind, TaskQueue::NextKind::kTask);
  EXPECT_TRUE(q.HoldBackAhead("t2", live)) << "the last task is t0's";
  EXPECT_TRUE(q.HoldBackAhead("t1", live));
  EXPECT_FALSE(q.HoldBackAhead("t1", {"t1", "t2"})) << "t0 is gone: nobody is waiting for it";
  EXPECT_FALSE(q.HoldBackAhead("t1", {})) << "live trainers unknown: as before";
  ASSERT_EQ(q.Dispatch("t0", 0).kind, TaskQueue::NextKind::kTask);
  EXPECT_FALSE(q.HoldBackAhead("t2", live)) << "every trainer has one";
}

// The queue keeps each trainer's pending tasks beside the pending list (Undelivered and
// HoldBackAhead read them on every GetTask, without a scan of every trainer's). Over random
// histories of dispatches, finishes, failures, timeouts, lost trainers, passes and a snapshot's
// restore, each trainer's undelivered task is the lowest it holds, as a scan of the list gave.
TEST(TaskQueueTest, EachTrainersTasksFollowEveryWayATaskComesAndGoes) {
  const std::vector<std::string> trainers = {"t0", "t1", "t2", "t3", "t4"};
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const TaskQueueOptions o = Opts(12, 1, 4, 3);
    TaskQueue q(o);
    std::map<int64_t, std::pair<int64_t, std::string>> pending;  // task -> (epoch, trainer): the model
    int64_t now = 0;
    // Bounded: 300 operations, or the job's end.
    for (int op = 0; op < 300 && !q.finished(); ++op) {
      const std::string& t = trainers[rng() % trainers.size()];
      const int kind = static_cast<int>(rng() % 10);
      std::optional<std::pair<int64_t, int64_t>> some;  // a pending (task, epoch), at random
      if (!pending.empty()) {
        auto it = std::next(pending.begin(), static_cast<long>(rng() % pending.size()));
        some = std::make_pair(it->first, it->second.first);
      }
      if (kind < 4) {
        auto n = q.Dispatch(t, now);
        if (n.kind == TaskQueue::NextKind::kTask) pending[n.task.task] = {n.task.epoch, t};
      } else if (kind < 6 && some) {
        ASSERT_TRUE(q.Finish(some->first, some->second));
        pending.erase(some->first);
      } else if (kind < 7 && some) {
        ASSERT_TRUE(q.Fail(some->first, some->second, "x"));
        pending.erase(some->first);
      } else if (kind < 8) {
        now += o.timeout_ms;
        for (const auto& [task, epoch] : q.Overdue(now)) {
          ASSERT_TRUE(q.Expire(task, epoch));
          pending.erase(task);
        }
      } else if (kind < 9) {
        q.TrainerLost(t);
        std::erase_if(pending, [&](const auto& p) { return p.second.second == t; });
      } else if (kind == 9) {
        auto restored = TaskQueue::Restore(o, q.Snapshot());
        ASSERT_TRUE(restored.ok()) << restored.status();
        q = std::move(*restored);
      }
      // Each trainer's undelivered task (it lists none as held) is the lowest it holds.
      for (const auto& tr : trainers) {
        std::optional<int64_t> lowest;
        for (const auto& [task, e] : pending) {
          if (e.second == tr) {
            lowest = task;
            break;
          }
        }
        auto u = q.Undelivered(tr, {}, now);
        ASSERT_EQ(u.has_value(), lowest.has_value()) << tr << " at operation " << op;
        if (u) {
          EXPECT_EQ(u->task, *lowest) << tr;
        } else {
          EXPECT_FALSE(q.HoldBackAhead(tr, {trainers.begin(), trainers.end()})) << tr << " holds nothing";
        }
      }
    }
  }
}

TEST(TaskQueueTest, OthersHoldSaysWhetherAnotherTrainerHasATask) {
  TaskQueue q(Opts(2));
  EXPECT_FALSE(q.OthersHold("t0"));
  auto n = q.Dispatch("t1", 0);
  ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
  EXPECT_TRUE(q.OthersHold("t0"));
  EXPECT_FALSE(q.OthersHold("t1")) << "its own task is not another's";
  ASSERT_TRUE(q.Finish(n.task.task, n.task.epoch));
  EXPECT_FALSE(q.OthersHold("t0"));
}

TEST(TaskQueueTest, ASmallDataSetIsCutIntoRecordRangesThatSurviveASnapshot) {
  TaskQueueOptions o = Opts(1);
  o.chunk_records = {300};
  o.min_tasks = 12;
  o.min_task_records = 64;
  TaskQueue q(o);
  ASSERT_EQ(q.tasks(), 4);
  std::set<int64_t> starts;
  for (int i = 0; i < 2; ++i) {
    auto n = q.Dispatch("t" + std::to_string(i), 0);
    ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
    EXPECT_EQ(n.task.first_chunk, 0);
    EXPECT_EQ(n.task.records, 75);
    starts.insert(n.task.first_record);
  }
  // A new master continues the same layout from the snapshot; other settings are refused.
  auto restored = TaskQueue::Restore(o, q.Snapshot());
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (int i = 0; i < 2; ++i) {
    auto n = restored->Dispatch("t9", 0);
    ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
    starts.insert(n.task.first_record);
  }
  EXPECT_EQ(starts, (std::set<int64_t>{0, 75, 150, 225}));
  TaskQueueOptions other = o;
  other.min_tasks = 0;
  EXPECT_FALSE(TaskQueue::Restore(other, q.Snapshot()).ok());
}

TEST(TaskQueueTest, ShuffleIsSeededAndDiffersBetweenPasses) {
  auto order = [](uint64_t seed, int passes) {
    auto o = Opts(50, 1, passes);
    o.seed = seed;
    TaskQueue q(o);
    std::vector<int64_t> out;
    while (true) {
      auto n = q.Dispatch("t", 0);
      if (n.kind != TaskQueue::NextKind::kTask) break;
      out.push_back(n.task.task);
      EXPECT_TRUE(q.Finish(n.task.task, n.task.epoch));
    }
    return out;
  };
  auto a = order(1, 2), b = order(1, 2), c = order(2, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_NE(std::vector<int64_t>(a.begin(), a.begin() + 50), std::vector<int64_t>(a.begin() + 50, a.end()));
}

TEST(TaskQueueTest, StaleEpochsAreIgnored) {
  TaskQueue q(Opts(2));
  auto a = q.Dispatch("t0", 0);
  EXPECT_FALSE(q.Finish(a.task.task, a.task.epoch + 100));
  EXPECT_FALSE(q.Fail(a.task.task, a.task.epoch - 1, "x"));
  // It times out and goes to someone else: the first trainer's late finish is stale.
  ASSERT_TRUE(q.Expire(a.task.task, a.task.epoch));
  auto again = q.Dispatch("t1", 0);
  ASSERT_EQ(again.task.task, a.task.task);
  EXPECT_GT(again.task.epoch, a.task.epoch);
  EXPECT_FALSE(q.Finish(a.task.task, a.task.epoch));
  EXPECT_TRUE(q.Finish(again.task.task, again.task.epoch));
  EXPECT_FALSE(q.Finish(again.task.task, again.task.epoch));  // twice: the second is stale
  EXPECT_EQ(q.stats().duplicates, 1);
}

TEST(TaskQueueTest, TimeoutsComeFromTicksAndReturnTasksAheadOfUntouchedOnes) {
  TaskQueue q(Opts(5));
  auto a = q.Dispatch("t0", 100);
  EXPECT_EQ(a.task.deadline_ms, 1100);
  EXPECT_TRUE(q.Overdue(1099).empty());
  auto overdue = q.Overdue(1100);
  ASSERT_EQ(overdue.size(), 1u);
  ASSERT_TRUE(q.Expire(overdue[0].first, overdue[0].second));
  EXPECT_EQ(q.Dispatch("t1", 1200).task.task, a.task.task);  // retried before untouched tasks
  EXPECT_EQ(q.stats().timeouts, 1);
}

// A task longer than the timeout is not taken from a trainer that reports progress on it; a
// stale dispatch's progress changes nothing, and a silent holder still times out.
TEST(TaskQueueTest, ProgressOnATaskPutsItsDeadlineATimeoutAhead) {
  TaskQueue q(Opts(5));
  auto a = q.Dispatch("t0", 100);
  auto b = q.Dispatch("t1", 100);
  for (int64_t now = 600; now <= 5100; now += 500) {
    ASSERT_TRUE(q.Progressed(a.task.task, a.task.epoch, now));
    auto overdue = q.Overdue(now + 1);
    for (const auto& [task, epoch] : overdue) EXPECT_NE(task, a.task.task) << "at " << now;
    for (const auto& [task, epoch] : overdue) (void)q.Expire(task, epoch);
  }
  EXPECT_EQ(q.stats().timeouts, 1) << "only the silent holder's task";
  EXPECT_FALSE(q.Progressed(b.task.task, b.task.epoch, 5200)) << "expired: its dispatch is stale";
  EXPECT_FALSE(q.Progressed(a.task.task, a.task.epoch + 100, 5200));
  EXPECT_TRUE(q.Overdue(6100).size() == 1u) << "a timeout after the last progress (5100)";
  EXPECT_TRUE(q.Progressed(a.task.task, a.task.epoch, 1000)) << "an older report moves no deadline back";
  EXPECT_EQ(q.Overdue(6099).size(), 0u);
  EXPECT_TRUE(q.Finish(a.task.task, a.task.epoch));
}

TEST(TaskQueueTest, FailuresPastTheLimitMoveTheTaskToFailedNotRetriedThisPass) {
  TaskQueue q(Opts(3, 1, 1, /*max_failures=*/1));
  auto a = q.Dispatch("t0", 0);
  ASSERT_TRUE(q.Fail(a.task.task, a.task.epoch, "corrupt chunk 7"));  // failure 1: retried
  auto b = q.Dispatch("t0", 0);
  ASSERT_EQ(b.task.task, a.task.task);
  ASSERT_TRUE(q.Fail(b.task.task, b.task.epoch, "corrupt chunk 7"));  // failure 2: failed
  EXPECT_EQ(q.counts().failed, 1);
  ASSERT_EQ(q.failed_history().size(), 1u);
  EXPECT_EQ(q.failed_history()[0].reason, "corrupt chunk 7");
  EXPECT_EQ(q.failed_history()[0].failures, 2);
  for (int i = 0; i < 2; ++i) {
    auto n = q.Dispatch("t0", 0);
    ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
    EXPECT_NE(n.task.task, a.task.task);
    ASSERT_TRUE(q.Finish(n.task.task, n.task.epoch));
  }
  EXPECT_TRUE(q.finished());
}

TEST(TaskQueueTest, PassEndsWhenTheLastTaskFailsForGood) {
  TaskQueue q(Opts(2, 1, /*passes=*/2, /*max_failures=*/0));
  auto a = q.Dispatch("t0", 0);
  auto b = q.Dispatch("t1", 0);
  ASSERT_TRUE(q.Finish(a.task.task, a.task.epoch));
  EXPECT_EQ(q.pass(), 0);
  ASSERT_TRUE(q.Fail(b.task.task, b.task.epoch, "bad"));  // the last task fails: pass over
  EXPECT_EQ(q.pass(), 1);
  // The next pass has every task again, the failed one included.
  std::set<int64_t> seen;
  for (int i = 0; i < 2; ++i) seen.insert(q.Dispatch("t0", 0).task.task);
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(q.counts().failed, 0);
}

TEST(TaskQueueTest, AllTasksFailingStillEndsEveryPassAndTheJob) {
  TaskQueue q(Opts(3, 1, /*passes=*/2, /*max_failures=*/0));
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < 3; ++i) {
      auto n = q.Dispatch("t", 0);
      ASSERT_EQ(n.kind, TaskQueue::NextKind::kTask);
      ASSERT_EQ(n.task.pass, pass);
      ASSERT_TRUE(q.Fail(n.task.task, n.task.epoch, "always fails"));
    }
  }
  EXPECT_TRUE(q.finished());
  EXPECT_EQ(q.Dispatch("t", 0).kind, TaskQueue::NextKind::kFinished);
  EXPECT_EQ(q.failed_history().size(), 6u);
}

TEST(TaskQueueTest, LateJoinerGetsTheCurrentPass) {
  TaskQueue q(Opts(2, 1, /*passes=*/3));
  for (int i = 0; i < 2; ++i) {
    auto n = q.Dispatch("early", 0);
    ASSERT_TRUE(q.Finish(n.task.task, n.task.epoch));
  }
  EXPECT_EQ(q.pass(), 1);
  EXPECT_EQ(q.Dispatch("late", 0).task.pass, 1);
}

TEST(TaskQueueTest, LostTrainersTasksReturnAtOnceWithAFailureCounted) {
  TaskQueue q(Opts(4, 1, 1, /*max_failures=*/0));
  auto a = q.Dispatch("dead", 0);
  auto b = q.Dispatch("dead", 0);
  auto c = q.Dispatch("alive", 0);
  EXPECT_EQ(q.TrainerLost("dead"), 2);
  EXPECT_EQ(q.counts().pending, 1);
  EXPECT_EQ(q.counts().failed, 2);  // max_failures 0: one loss is enough
  EXPECT_EQ(q.TrainerLost("nobody"), 0);
  EXPECT_FALSE(q.Finish(a.task.task, a.task.epoch));
  EXPECT_TRUE(q.Finish(c.task.task, c.task.epoch));
  (void)b;
}

TEST(TaskQueueTest, FinishedQueueSaysSoAndCountsAddUp) {
  TaskQueue q(Opts(3));
  auto n1 = q.Dispatch("t", 0);
  auto c = q.counts();
  EXPECT_EQ(c.todo + c.pending + c.done + c.failed, 3);
  ASSERT_TRUE(q.Finish(n1.task.task, n1.task.epoch));
  while (true) {
    auto n = q.Dispatch("t", 0);
    if (n.kind == TaskQueue::NextKind::kFinished) break;
    ASSERT_TRUE(q.Finish(n.task.task, n.task.epoch));
  }
  EXPECT_EQ(q.stats().finishes, 3);
  EXPECT_EQ(q.stats().duplicates, 0);
}

// Replaying the same events gives the same state; a snapshot restores it exactly.
TEST(TaskQueueTest, RandomEventsReplayAndSnapshotRestoreExactly) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    std::mt19937 rng(seed);
    auto o = Opts(40, 3, 3, 2);
    TaskQueue q(o);
    std::vector<TaskQueue::Dispatched> held;
    int64_t now = 0;
    for (int i = 0; i < 300 && !q.finished(); ++i) {
      now += 100;
      int ev = rng() % 10;
      std::string trainer = "t" + std::to_string(rng() % 3);
      if (ev < 4) {
        auto n = q.Dispatch(trainer, now);
        if (n.kind == TaskQueue::NextKind::kTask) held.push_back(n.task);
      } else if (ev < 7 && !held.empty()) {
        auto d = held[rng() % held.size()];
        (void)q.Finish(d.task, d.epoch);
      } else if (ev == 7 && !held.empty()) {
        auto d = held[rng() % held.size()];
        (void)q.Fail(d.task, d.epoch, "r");
      } else if (ev == 8) {
        for (auto [t, e] : q.Overdue(now)) ASSERT_TRUE(q.Expire(t, e));
      } else {
        q.TrainerLost(trainer);
      }
      auto c = q.counts();
      if (!q.finished()) {
        ASSERT_EQ(c.todo + c.pending + c.done + c.failed, q.tasks()) << "seed " << seed;
      }
      if (i % 37 == 0) {
        auto r = TaskQueue::Restore(o, q.Snapshot());
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(r->Snapshot(), q.Snapshot());
        // The restored queue hands out exactly what the original would.
        auto a = q.Dispatch("x", now), b = r->Dispatch("x", now);
        ASSERT_EQ(a.kind, b.kind);
        ASSERT_EQ(a.task.task, b.task.task);
        ASSERT_EQ(a.task.epoch, b.task.epoch);
        if (a.kind == TaskQueue::NextKind::kTask) held.push_back(a.task);
      }
    }
  }
}

TEST(TaskQueueTest, SnapshotOfAHundredThousandChunksFitsEasilyInAnEtcdRequest) {
  TaskQueue q(Opts(100000, 1, 3));
  // Half done, some pending, some failed.
  for (int i = 0; i < 50000; ++i) {
    auto n = q.Dispatch("t" + std::to_string(i % 8), 0);
    if (i % 1000 == 0) continue;  // left pending
    if (i % 997 == 0) {
      (void)q.Fail(n.task.task, n.task.epoch, "corrupt");
    } else {
      (void)q.Finish(n.task.task, n.task.epoch);
    }
  }
  std::string snap = q.Snapshot();
  EXPECT_LT(snap.size(), 60u * 1024) << snap.size();
  std::string packed(ZSTD_compressBound(snap.size()), '\0');
  packed.resize(ZSTD_compress(packed.data(), packed.size(), snap.data(), snap.size(), 3));
  EXPECT_LT(packed.size(), 1572864u / 10) << "etcd's default request limit is 1.5 MiB";
  EXPECT_TRUE(TaskQueue::Restore(q.options(), snap).ok());
}

TEST(TaskQueueTest, CorruptOrForeignSnapshotsAreRefused) {
  TaskQueue q(Opts(10));
  std::string s = q.Snapshot();
  EXPECT_EQ(TaskQueue::Restore(Opts(11), s).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(TaskQueue::Restore(Opts(10), s.substr(0, s.size() / 2)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(TaskQueue::Restore(Opts(10), "garbage").status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(Opts(0).Validate().ok());
}

}  // namespace
}  // namespace tessera::master
