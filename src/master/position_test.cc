// Unit tests of data positions for consistent checkpoints: the saved form, which reports make a
// version complete, the rollback choice, and the property that matters: a task queue rewound to
// the position of version V hands out exactly the records the original run trained after V.
#include "master/position.h"

#include <gtest/gtest.h>

#include "master/task_queue.h"

namespace tessera::master {
namespace {

TEST(DataPositionTest, JsonRoundTripAndBadInputNamed) {
  DataPosition p = DataPosition::Start(11);
  p.version = 40;
  p.pass = 1;
  p.done[0] = p.done[5] = p.done[10] = true;
  p.partial = {{3, 17}, {7, 2}};
  auto back = DataPosition::FromJson(p.ToJson(), 11);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->version, 40);
  EXPECT_EQ(back->pass, 1);
  EXPECT_EQ(back->done, p.done);
  EXPECT_EQ(back->partial, p.partial);

  auto wrong_tasks = DataPosition::FromJson(p.ToJson(), 12);
  ASSERT_FALSE(wrong_tasks.ok());
  EXPECT_NE(wrong_tasks.status().message().find("11 tasks"), std::string::npos);
  EXPECT_FALSE(DataPosition::FromJson("{", 11).ok());
  EXPECT_FALSE(
      DataPosition::FromJson(R"({"version":1,"pass":0,"tasks":11,"done":"zzz","partial":[]})", 11).ok());
  auto bad_partial =
      DataPosition::FromJson(R"({"version":1,"pass":0,"tasks":4,"done":"0","partial":[[9,1]]})", 4);
  ASSERT_FALSE(bad_partial.ok());
  EXPECT_NE(bad_partial.status().message().find("partial"), std::string::npos);
  // A bit past the last task is refused, not ignored.
  EXPECT_FALSE(DataPosition::FromJson(R"({"version":1,"pass":0,"tasks":2,"done":"4","partial":[]})", 2).ok());
}

TrainerPosition Report(const std::string& trainer, int64_t version, int64_t first_step) {
  TrainerPosition p;
  p.trainer = trainer;
  p.version = version;
  p.first_step = first_step;
  return p;
}

TEST(PositionBookTest, CompleteWhenEveryLiveTrainerReportedOrBeganLater) {
  PositionBook book;
  book.SetLive({"0", "1"});
  book.Add(Report("0", 10, 1));
  EXPECT_TRUE(book.Complete().empty());  // trainer 1 never heard from
  book.Add(Report("1", 10, 1));
  EXPECT_EQ(book.Complete(), std::vector<int64_t>{10});
  // Trainer 2 joins at step 15: it is not waited for at 20 only if it began after 20.
  book.SetLive({"0", "1", "2"});
  book.Add(Report("0", 20, 1));
  book.Add(Report("1", 20, 1));
  EXPECT_EQ(book.Complete(), std::vector<int64_t>{});  // 2 unknown: it may hold data of 20
  book.Add(Report("2", 30, 25));                       // began at 25: nothing of 20 or 10
  EXPECT_EQ(book.Complete(), (std::vector<int64_t>{10, 20}));
  book.Add(Report("0", 30, 1));
  EXPECT_EQ(book.Complete(), (std::vector<int64_t>{10, 20}));
  // Trainer 1 leaves: 30 is complete without it.
  book.SetLive({"0", "2"});
  EXPECT_EQ(book.Complete(), (std::vector<int64_t>{10, 20, 30}));
  book.ForgetThrough(20);
  EXPECT_EQ(book.Complete(), std::vector<int64_t>{30});
  EXPECT_EQ(book.ReportsAt(30).size(), 2u);
  // A trainer that skipped a version it was in (reported 40 but not 30) makes 30 incomplete.
  PositionBook gap;
  gap.SetLive({"0", "1"});
  gap.Add(Report("0", 30, 1));
  gap.Add(Report("1", 40, 1));
  gap.Add(Report("0", 40, 1));
  EXPECT_EQ(gap.Complete(), std::vector<int64_t>{40});
}

TEST(ChooseRollbackVersionTest, WhatItChoseFromIsDescribedForTheLog) {
  EXPECT_EQ(
      DescribeRollbackCandidates(3, {{0, {40, 80}}, {2, {40}}}, {80}),
      "pserver 0 holds [40,80]; pserver 1 holds []; pserver 2 holds [40]; data positions saved for [80]");
  EXPECT_EQ(DescribeRollbackCandidates(1, {}, {}), "pserver 0 holds []; data positions saved for []");
}

TEST(ChooseRollbackVersionTest, HighestVersionEveryPserverHoldsWithAPosition) {
  // Both hold 20 and 30; the position of 30 is saved.
  EXPECT_EQ(ChooseRollbackVersion(2, {{0, {20, 30}}, {1, {20, 30}}}, {20, 30}), 30);
  // 30 has no saved position yet: 20.
  EXPECT_EQ(ChooseRollbackVersion(2, {{0, {20, 30}}, {1, {20, 30}}}, {20}), 20);
  // Pserver 1's 30 is corrupt (not in its good set): 20.
  EXPECT_EQ(ChooseRollbackVersion(2, {{0, {20, 30}}, {1, {20}}}, {20, 30}), 20);
  // Only the initial checkpoints: version 0 needs no saved position.
  EXPECT_EQ(ChooseRollbackVersion(2, {{0, {0}}, {1, {0}}}, {}), 0);
  // Nothing in common, a pserver with nothing, no pservers.
  EXPECT_EQ(ChooseRollbackVersion(2, {{0, {30}}, {1, {20}}}, {20, 30}), std::nullopt);
  EXPECT_EQ(ChooseRollbackVersion(2, {{0, {0, 10}}}, {10}), std::nullopt);
  EXPECT_EQ(ChooseRollbackVersion(0, {}, {}), std::nullopt);
  EXPECT_EQ(ChooseRollbackVersion(1, {{0, {10}}}, {}), std::nullopt);  // 10 without a position
}

// One simulated trainer: batches of `batch` records from the tasks the queue hands out, one
// step per batch, acknowledging after the step and reporting its position at every multiple
// of `every`, as the session does. Records are (task, index) pairs.
struct PositionTrainer {
  TaskQueue* q;
  std::string id = "0";
  int64_t every = 4;
  size_t batch = 3;
  int64_t step = 0;
  int64_t first_step = 1;
  bool has = false;
  TaskQueue::Dispatched task;
  int64_t offset = 0, records = 0;
  std::vector<TaskQueue::Dispatched> trained_wait;
  std::map<int64_t, TrainerPosition> reports;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> steps;  // per step after the start

  static int64_t RecordsOf(int64_t task) { return 4 + task % 3; }

  // One step; false when every pass is done and nothing was trained.
  bool Step() {
    std::vector<std::pair<int64_t, int64_t>> got;
    while (got.size() < batch) {
      if (has && offset >= records) {
        trained_wait.push_back(task);
        has = false;
      }
      if (!has) {
        auto n = q->Dispatch(id, 0);
        if (n.kind != TaskQueue::NextKind::kTask) break;
        task = n.task;
        has = true;
        records = RecordsOf(task.task);
        offset = std::min(records, task.skip_records);
        continue;
      }
      got.emplace_back(task.pass * 1000 + task.task, offset++);
    }
    if (got.empty() && trained_wait.empty()) return false;
    ++step;
    steps.push_back(got);
    for (const auto& t : trained_wait) q->Finish(t.task, t.epoch, step);
    trained_wait.clear();
    if (step % every == 0) {
      TrainerPosition p{id, step, first_step, {}};
      if (has) p.tasks.push_back(HeldPosition{task.task, task.epoch, task.pass, offset, records});
      reports[step] = p;
    }
    return true;
  }
};

TEST(TaskQueueRewindTest, RewoundQueueRepeatsExactlyWhatTheRunTrainedAfterEveryCheckpoint) {
  TaskQueueOptions o;
  o.chunks = 9;
  o.passes = 2;
  o.seed = 7;
  TaskQueue original(o);
  PositionTrainer run{&original};
  std::vector<std::pair<int64_t, TaskQueue>> states;  // the queue right after each step
  for (int i = 0; i < 1000 && run.Step(); ++i) states.emplace_back(run.step, original);
  ASSERT_TRUE(original.finished());
  ASSERT_GT(run.step, 12);

  int checked = 0;
  for (const auto& [v, report] : run.reports) {
    // The master computes the position of v some steps later (reports arrive late); the crash
    // comes later still. Both must not matter.
    for (int64_t late : {int64_t{0}, int64_t{2}}) {
      if (v + late > run.step) continue;
      const TaskQueue& at_compute = states[static_cast<size_t>(v + late - 1)].second;
      auto pos = at_compute.PositionAt(v, {report});
      ASSERT_TRUE(pos.ok()) << pos.status().ToString();
      for (int64_t crash : {v + late, run.step}) {
        TaskQueue q = states[static_cast<size_t>(crash - 1)].second;
        ASSERT_TRUE(q.Rewind(*pos, 1).ok());
        PositionTrainer again{&q};
        again.step = v;
        for (int i = 0; i < 1000 && again.Step(); ++i) {
        }
        std::vector<std::vector<std::pair<int64_t, int64_t>>> expected(run.steps.begin() + v,
                                                                       run.steps.end());
        EXPECT_EQ(again.steps, expected)
            << "rolled back to " << v << ", position computed at " << v + late << ", crash at " << crash;
        EXPECT_TRUE(q.finished());
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(TaskQueueRewindTest, SnapshotKeepsFinishStepsSkipsAndGeneration) {
  TaskQueueOptions o;
  o.chunks = 6;
  o.passes = 1;
  o.seed = 3;
  TaskQueue q(o);
  auto a = q.Dispatch("0", 0), b = q.Dispatch("0", 0);
  ASSERT_TRUE(q.Finish(a.task.task, a.task.epoch, 5));
  DataPosition p = DataPosition::Start(q.tasks());
  p.version = 4;
  p.partial = {{b.task.task, 2}};
  ASSERT_TRUE(q.Rewind(p, 3).ok());
  auto restored = TaskQueue::Restore(o, q.Snapshot());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->rewind_generation(), 3);
  auto first = restored->Dispatch("0", 0);
  EXPECT_EQ(first.task.task, b.task.task);
  EXPECT_EQ(first.task.skip_records, 2);
  EXPECT_EQ(restored->counts().todo, q.tasks() - 1);
  // A position that does not fit the queue is refused.
  EXPECT_FALSE(q.Rewind(DataPosition::Start(q.tasks() + 1), 4).ok());
  DataPosition late = DataPosition::Start(q.tasks());
  late.pass = 1;
  EXPECT_FALSE(q.Rewind(late, 4).ok());
}

}  // namespace
}  // namespace tessera::master
