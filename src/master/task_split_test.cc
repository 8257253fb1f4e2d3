// TaskQueue's splits of a slow trainer's task for idle trainers: when a split is offered, what
// the holder and the piece's taker get, and — over many random runs with trainers of different
// speeds, losses and restores — every record of every pass trained exactly once.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>

#include "master/events.h"
#include "master/task_queue.h"

namespace tessera::master {
namespace {

// `chunks` chunks of `records` records, one task each.
TaskQueueOptions SplitOpts(int64_t chunks, int64_t records, int passes = 1, int64_t split_min = 10) {
  TaskQueueOptions o;
  o.chunks = chunks;
  o.chunk_records.assign(static_cast<size_t>(chunks), records);
  o.passes = passes;
  o.max_failures = 100;
  o.timeout_ms = 1000000;
  o.seed = 7;
  o.split_min_records = split_min;
  return o;
}

TEST(TaskSplitTest, AnIdleTrainerGetsTheSecondHalfOfWhatTheSlowOneHasLeft) {
  TaskQueue q(SplitOpts(2, 100));
  auto a = q.Dispatch("slow", 0), b = q.Dispatch("fast", 0);
  ASSERT_EQ(a.kind, TaskQueue::NextKind::kTask);
  ASSERT_EQ(b.kind, TaskQueue::NextKind::kTask);
  // Nobody idle yet: no split.
  EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch, 20, 100).empty());
  ASSERT_TRUE(q.Finish(b.task.task, b.task.epoch));
  EXPECT_EQ(q.Dispatch("fast", 0).kind, TaskQueue::NextKind::kWait);  // now idle
  // The holder's own report never counts it as idle, a stale epoch is no split.
  EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch + 5, 20, 100).empty());
  auto cuts = q.ProposeSplit(a.task.task, a.task.epoch, 20, 100);
  ASSERT_EQ(cuts, std::vector<int64_t>{60});  // one idle trainer: half of the 80 left
  const int64_t piece = q.Split(a.task.task, a.task.epoch, cuts[0], 100);
  EXPECT_EQ(piece, q.tasks());
  EXPECT_EQ(q.stats().splits, 1);
  // The piece is waiting: no second split for the same idle trainer.
  EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch, 21, 100).empty());
  auto p = q.Dispatch("fast", 0);
  ASSERT_EQ(p.kind, TaskQueue::NextKind::kTask);
  EXPECT_EQ(p.task.task, piece);
  EXPECT_EQ(p.task.first_chunk, a.task.first_chunk);
  EXPECT_EQ(p.task.skip_records, 60);
  EXPECT_EQ(p.task.end_record, 100);
  // The task is done when both parts are; the pass ends then.
  EXPECT_EQ(q.counts().pending, 1);
  ASSERT_TRUE(q.Finish(p.task.task, p.task.epoch));
  EXPECT_FALSE(q.IsDone(a.task.task));
  EXPECT_FALSE(q.finished());
  ASSERT_TRUE(q.Finish(a.task.task, a.task.epoch));
  EXPECT_TRUE(q.IsDone(a.task.task));
  EXPECT_TRUE(q.finished());
  EXPECT_EQ(q.counts().done, 2);
}

TEST(TaskSplitTest, ThreeIdleTrainersEachGetAQuarterOfWhatIsLeft) {
  TaskQueue q(SplitOpts(1, 1000));
  auto a = q.Dispatch("slow", 0);
  for (const char* t : {"b", "c", "d"}) EXPECT_EQ(q.Dispatch(t, 0).kind, TaskQueue::NextKind::kWait);
  auto cuts = q.ProposeSplit(a.task.task, a.task.epoch, 200, 1000);
  ASSERT_EQ(cuts, (std::vector<int64_t>{800, 600, 400}));
  for (int64_t cut : cuts) ASSERT_GE(q.Split(a.task.task, a.task.epoch, cut, 1000), 0);
  std::set<std::pair<int64_t, int64_t>> ranges;
  for (const char* t : {"b", "c", "d"}) {
    auto p = q.Dispatch(t, 0);
    ASSERT_EQ(p.kind, TaskQueue::NextKind::kTask);
    ranges.insert({p.task.skip_records, p.task.end_record});
  }
  EXPECT_EQ(ranges, (std::set<std::pair<int64_t, int64_t>>{{400, 600}, {600, 800}, {800, 1000}}));
  // Fewer parts when the rest is short (parts of at least 10): 60 left -> 4 parts, 25 -> 2.
  TaskQueue r(SplitOpts(1, 100));
  auto h = r.Dispatch("slow", 0);
  for (const char* t : {"b", "c", "d"}) EXPECT_EQ(r.Dispatch(t, 0).kind, TaskQueue::NextKind::kWait);
  EXPECT_EQ(r.ProposeSplit(h.task.task, h.task.epoch, 40, 100), (std::vector<int64_t>{85, 70, 55}));
  EXPECT_EQ(r.ProposeSplit(h.task.task, h.task.epoch, 75, 100), (std::vector<int64_t>{87}));
}

TEST(TaskSplitTest, NoSplitWhileUntouchedTasksRemainOrWhenTooLittleIsLeftOrWhenOff) {
  {
    TaskQueue q(SplitOpts(3, 100));
    auto a = q.Dispatch("a", 0);
    // Task 2 and 3 are still untouched: an asking trainer gets one of them, not a piece.
    EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch, 0, 100).empty());
  }
  {
    TaskQueue q(SplitOpts(1, 100));
    auto a = q.Dispatch("a", 0);
    EXPECT_EQ(q.Dispatch("b", 0).kind, TaskQueue::NextKind::kWait);
    EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch, 81, 100).empty());  // 19 < 2 x 10
    EXPECT_EQ(q.ProposeSplit(a.task.task, a.task.epoch, 80, 100), std::vector<int64_t>{90});
    EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch, 101, 100).empty());  // past the end
    // A cut outside what the item has left does not apply.
    EXPECT_EQ(q.Split(a.task.task, a.task.epoch, 0, 100), -1);
    EXPECT_EQ(q.Split(a.task.task, a.task.epoch, 100, 100), -1);
  }
  {
    TaskQueue q(SplitOpts(1, 100, 1, /*split_min=*/0));
    auto a = q.Dispatch("a", 0);
    EXPECT_EQ(q.Dispatch("b", 0).kind, TaskQueue::NextKind::kWait);
    EXPECT_TRUE(q.ProposeSplit(a.task.task, a.task.epoch, 0, 100).empty());
  }
}

TEST(TaskSplitTest, AHolderLostAfterASplitRequeuesOnlyItsPart) {
  TaskQueue q(SplitOpts(1, 100));
  auto a = q.Dispatch("a", 0);
  EXPECT_EQ(q.Dispatch("b", 0).kind, TaskQueue::NextKind::kWait);
  ASSERT_GE(q.Split(a.task.task, a.task.epoch, 50, 100), 0);
  auto p = q.Dispatch("b", 0);
  ASSERT_EQ(p.kind, TaskQueue::NextKind::kTask);
  EXPECT_EQ(q.TrainerLost("a"), 1);
  auto again = q.Dispatch("c", 0);
  ASSERT_EQ(again.kind, TaskQueue::NextKind::kTask);
  EXPECT_EQ(again.task.task, a.task.task);
  EXPECT_EQ(again.task.skip_records, 0);
  EXPECT_EQ(again.task.end_record, 50);
  ASSERT_TRUE(q.Finish(again.task.task, again.task.epoch));
  ASSERT_TRUE(q.Finish(p.task.task, p.task.epoch));
  EXPECT_TRUE(q.finished());
}

TEST(TaskSplitTest, ASplitEventReplaysAndARestoredQueueContinuesTheSame) {
  TaskQueue q(SplitOpts(2, 100));
  auto a = q.Dispatch("a", 0), b = q.Dispatch("b", 0);
  ASSERT_TRUE(q.Finish(b.task.task, b.task.epoch));
  EXPECT_EQ(q.Dispatch("b", 0).kind, TaskQueue::NextKind::kWait);
  auto cuts = q.ProposeSplit(a.task.task, a.task.epoch, 10, 100);
  ASSERT_EQ(cuts.size(), 1u);
  const int64_t* cut = &cuts[0];
  Event e{Event::Type::kSplit, "a", a.task.task, a.task.epoch, ""};
  e.cut = *cut;
  e.records = 100;
  ASSERT_GE(q.Split(a.task.task, a.task.epoch, *cut, 100), 0);
  // A master that replays the logged events reaches the same queue.
  TaskQueue r(SplitOpts(2, 100));
  ASSERT_TRUE(Replay(r, Event{Event::Type::kDispatch, "a", a.task.task, a.task.epoch, ""}, 0).ok());
  ASSERT_TRUE(Replay(r, Event{Event::Type::kDispatch, "b", b.task.task, b.task.epoch, ""}, 0).ok());
  ASSERT_TRUE(Replay(r, Event{Event::Type::kFinish, "b", b.task.task, b.task.epoch, ""}, 0).ok());
  auto decoded = DecodeDelta(std::string(1, '\x01') +
                             std::string(1, static_cast<char>(EncodeEvent(e).size())) + EncodeEvent(e));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ((*decoded)[0].cut, *cut);
  EXPECT_EQ((*decoded)[0].records, 100);
  ASSERT_TRUE(Replay(r, (*decoded)[0], 0).ok());
  EXPECT_EQ(r.Snapshot(), q.Snapshot());
  // A split that does not fit the queue is a diverged replay.
  Event bad = e;
  bad.cut = 1000;
  EXPECT_FALSE(Replay(r, bad, 0).ok());
  // And from a snapshot.
  auto restored = TaskQueue::Restore(SplitOpts(2, 100), q.Snapshot());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->Snapshot(), q.Snapshot());
  auto p1 = q.Dispatch("b", 0), p2 = restored->Dispatch("b", 0);
  EXPECT_EQ(p1.task.task, p2.task.task);
  EXPECT_EQ(p1.task.skip_records, p2.task.skip_records);
  EXPECT_EQ(p1.task.end_record, p2.task.end_record);
}

// A trainer of the simulation: what it holds and how fast it reads.
struct SimTrainer {
  std::string name;
  int speed = 1;  // records per tick
  std::optional<TaskQueue::Dispatched> held;
  int64_t next = 0, end = 0;
  std::vector<int64_t> trained;  // records of the held item trained so far
};

TEST(TaskSplitTest, EveryRecordIsTrainedExactlyOnceWhateverTheSplitsLossesAndRestores) {
  int64_t splits = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const int64_t chunks = 1 + rng() % 6, records = 20 + rng() % 300;
    const int passes = 1 + static_cast<int>(rng() % 3);
    auto o = SplitOpts(chunks, records, passes, 1 + rng() % 20);
    auto q = std::make_unique<TaskQueue>(o);
    std::vector<SimTrainer> trainers;
    const int n = 2 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i)
      trainers.push_back(
          {"t" + std::to_string(i), i == 0 ? 1 : 1 + static_cast<int>(rng() % 30), {}, 0, 0, {}});
    // pass -> chunk -> record -> times trained
    std::map<int, std::map<int64_t, std::map<int64_t, int>>> count;
    int64_t now = 0;
    for (int tick = 0; tick < 200000 && !q->finished(); ++tick) {
      now += 10;
      for (auto& t : trainers) {
        if (!t.held) {
          auto d = q->Dispatch(t.name, now);
          if (d.kind != TaskQueue::NextKind::kTask) continue;
          t.held = d.task;
          t.next = d.task.skip_records;
          t.end = d.task.end_record > 0 ? d.task.end_record : records;
          t.trained.clear();
          continue;
        }
        if (tick % 3 == 0) {
          const int64_t records_now = t.end;
          for (int64_t cut : q->ProposeSplit(t.held->task, t.held->epoch, t.next, records_now)) {
            ASSERT_GE(q->Split(t.held->task, t.held->epoch, cut, records_now), 0);
            ASSERT_LT(cut, t.end) << "cuts come last first";
            t.end = cut;
            ++splits;
          }
        }
        for (int k = 0; k < t.speed && t.next < t.end; ++k) {
          ++count[t.held->pass][t.held->first_chunk][t.next];
          t.trained.push_back(t.next++);
        }
        if (t.next == t.end) {
          ASSERT_TRUE(q->Finish(t.held->task, t.held->epoch)) << "seed " << seed;
          t.held.reset();
        }
      }
      // Now and then a trainer is lost (what it trained of its item is not counted: the item
      // is trained again), or the master is replaced by one restored from a snapshot.
      if (rng() % 500 == 0) {
        auto& t = trainers[rng() % trainers.size()];
        if (t.held) {
          for (int64_t r : t.trained) --count[t.held->pass][t.held->first_chunk][r];
          t.held.reset();
        }
        q->TrainerLost(t.name);
      }
      if (rng() % 300 == 0) {
        auto r = TaskQueue::Restore(o, q->Snapshot());
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(r->Snapshot(), q->Snapshot());
        q = std::make_unique<TaskQueue>(std::move(*r));
      }
      auto c = q->counts();
      if (!q->finished()) {
        ASSERT_EQ(c.todo + c.pending + c.done + c.failed, q->tasks()) << "seed " << seed;
      }
    }
    ASSERT_TRUE(q->finished()) << "seed " << seed;
    for (int p = 0; p < passes; ++p) {
      for (int64_t c = 0; c < chunks; ++c) {
        for (int64_t r = 0; r < records; ++r) {
          ASSERT_EQ(count[p][c][r], 1)
              << "seed " << seed << " pass " << p << " chunk " << c << " record " << r;
        }
      }
    }
  }
  EXPECT_GT(splits, 200) << "the slow trainer's tasks were split";
}

}  // namespace
}  // namespace tessera::master
