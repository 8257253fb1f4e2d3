// TaskQueue: the master's data-task bookkeeping, as a pure state machine (no I/O, no clock:
// times are milliseconds passed in by the caller).
//
// Tasks are groups of `chunks_per_task` consecutive chunks, or record ranges of chunks when that
// would give fewer than `min_tasks` tasks (master/task_layout.h). Each pass visits every task in
// a seeded random order. A task is todo, pending (handed out, with a deadline), done or failed:
//  - a dispatch carries an epoch (unique, increasing); Finish/Fail must name it, stale ones are
//    ignored;
//  - a task that times out, fails, or whose trainer is lost returns to todo (ahead of untouched
//    tasks) with its failure count raised; past `max_failures` it moves to failed and is not
//    retried in this pass;
//  - a pass ends whenever todo and pending are both empty, whatever led there; the next pass
//    starts with every task (done and failed) in a new seeded order; after the last pass the
//    queue is finished;
//  - a trainer that asks late simply gets a task of the current pass.
// Stragglers: once no untouched task is left, a trainer that asks and gets nothing is idle. A
// trainer still holding a task reports how far it got (ProposeSplit); while trainers are idle
// the rest of that task is cut in equal parts, one for the holder and one for each idle trainer
// (parts of at least split_min_records): the holder stops at the first cut (Split, once per cut;
// it is told so in the answer) and each part after it becomes a piece, a work item of its own
// (id >= tasks()), handed out first. A task is done when its own part and all its pieces are. So the end of a
// pass does not wait for the slowest trainer to read a whole task alone. Everything that changes the queue is
// an event that can be replayed (the master persists the event log): Dispatch, Finish, Fail, Expire,
// TrainerLost, Split. Given the same events in the same order, a replay reaches the same state, epochs
// included.
//
// Following a growing data set (`follow`, one pass, no splits): the pass does not end when every
// task is done; AddChunks (an event) appends one task per new chunk, handed out after the tasks
// before it in chunk order, until StopFollowing (an event); then the pass ends as usual once the
// last task is done, and the queue is finished.
//
// Consistent checkpoints (sync jobs with checkpoint steps): a Finish may carry the trainer's
// step; the queue keeps the recent ones, so PositionAt(V, reports) can say which tasks the model
// at version V contains (whole, or their first records), and Rewind() puts the queue back to
// such a position after the model was rolled back to V.
//
// Not thread-safe: the master serializes events.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "master/position.h"
#include "master/task_layout.h"
#include "tessera/status.h"

namespace tessera {
class ByteReader;
}

namespace tessera::master {

struct TaskQueueOptions {
  int64_t chunks = 0;  // chunks in the data set
  // Records of each chunk (empty: unknown; tasks are then whole chunks).
  std::vector<int64_t> chunk_records;
  int chunks_per_task = 1;
  // Fewer whole-chunk tasks than this: cut chunks into record ranges of at least
  // `min_task_records` records (see task_layout.h). 0: never.
  int64_t min_tasks = 0;
  int64_t min_task_records = 1;
  // Pending tasks are split for idle trainers into parts of at least this many records (0:
  // never split; jobs with consistent checkpoints do not, as positions name whole tasks).
  int64_t split_min_records = 0;
  int64_t timeout_ms = 60000;  // a pending task goes back to todo after this long
  int max_failures = 3;        // failures tolerated before a task is moved to failed
  int passes = 1;
  uint64_t seed = 1;  // shuffling seed
  // Follow a growing data set (see above). Needs passes 1 and split_min_records 0.
  bool follow = false;
  Status Validate() const;
};

class TaskQueue {
 public:
  explicit TaskQueue(TaskQueueOptions options);

  struct Dispatched {
    int64_t task = 0;
    int64_t epoch = 0;
    int pass = 0;
    int64_t first_chunk = 0;
    int64_t chunks = 0;
    int64_t first_record = 0;  // a record range of the chunk when records > 0
    int64_t records = 0;       // 0: every record of the chunks
    int64_t deadline_ms = 0;
    int64_t skip_records = 0;  // already in the model (after a rewind mid-task), or a piece's start
    int64_t end_record = 0;    // > 0: stop before this record of the task (it was split there)
  };
  enum class NextKind { kTask, kWait, kFinished };
  struct Next {
    NextKind kind = NextKind::kWait;
    Dispatched task;
  };

  Next Dispatch(const std::string& trainer, int64_t now_ms);
  // A task pending at `trainer` that it does not hold (`held`: the work items and epochs its
  // reader lists), i.e. a dispatch whose answer never reached it: the call timed out at the
  // trainer, or the master that made it died before answering. Returned as it was dispatched
  // (the same epoch; its range as splits left it), with a fresh deadline. Not an event: the log
  // has its dispatch, and deadlines are not replayed. nullopt when there is none.
  std::optional<Dispatched> Undelivered(const std::string& trainer,
                                        const std::set<std::pair<int64_t, int64_t>>& held, int64_t now_ms);
  // Whether `trainer`, asking while it already holds a task (a reader fetching ahead), should
  // wait instead: the tasks left to hand out are no more than the `live` trainers holding none,
  // who need them first (else two readers fetching ahead can hold a small pass's every task).
  // Changes nothing: a wait is not an event, so replaying the log is unaffected.
  bool HoldBackAhead(const std::string& trainer, const std::set<std::string>& live) const;
  // Whether a trainer other than `trainer` holds a task.
  bool OthersHold(const std::string& trainer) const;
  // True if (task, epoch) was pending and is now done; false if stale (ignored). `step`: the
  // trainer's step at the acknowledgement (>= 0 is remembered for PositionAt), or -1.
  bool Finish(int64_t task, int64_t epoch, int64_t step = -1);
  bool Fail(int64_t task, int64_t epoch, const std::string& reason);
  // The pending dispatches whose deadline is <= now; the caller Expire()s each (and logs it).
  std::vector<std::pair<int64_t, int64_t>> Overdue(int64_t now_ms) const;
  bool Expire(int64_t task, int64_t epoch);
  // Its holder reported progress on work item `task` (dispatch `epoch`): the task is being
  // trained, so its deadline is `now_ms` + the timeout again (a task longer than the timeout
  // is not taken from a trainer that is still reading it). False if the dispatch is stale.
  // Deadlines are not in the log: a master taking over gives every pending task a fresh one.
  bool Progressed(int64_t task, int64_t epoch, int64_t now_ms);
  // Returns every task pending at `trainer` to todo (failure counted); returns how many.
  int TrainerLost(const std::string& trainer);
  // The trainer holding work item `task` (dispatch `epoch`) has trained `offset` of its task's
  // `records` records: where to cut the rest for the idle trainers, last cut first (apply them
  // with Split in this order); empty when nobody is idle, too little is left, the dispatch is
  // stale, or splitting is off. Changes nothing.
  std::vector<int64_t> ProposeSplit(int64_t task, int64_t epoch, int64_t offset, int64_t records) const;
  // Cuts work item `task` at record `cut` of its task (of `records`): the holder stops there
  // and records [cut, end) become a new piece, first in line. The piece's id, or -1 if the cut
  // does not fit (stale dispatch, cut outside the item's remaining records).
  int64_t Split(int64_t task, int64_t epoch, int64_t cut, int64_t records);
  // Pieces cut this pass.
  int64_t pieces() const { return static_cast<int64_t>(pieces_.size()); }
  // Gives every pending task a fresh deadline from `now_ms` (after a restore on a new master).
  void ResetDeadlines(int64_t now_ms);

  // Following: tasks for chunks appended to the data set (their record counts, in order; one
  // task each). FailedPrecondition if the queue does not follow, or no longer (StopFollowing).
  Status AddChunks(const std::vector<int64_t>& chunk_records);
  // No more chunks: the queue finishes once every task is done.
  void StopFollowing();
  bool following() const { return following_; }
  // Chunks the data set had at the start plus those added.
  int64_t chunks() const { return options_.chunks + static_cast<int64_t>(added_.size()); }

  struct Counts {
    int64_t todo = 0, pending = 0, done = 0, failed = 0;
  };
  Counts counts() const;
  int pass() const { return pass_; }
  int passes() const { return options_.passes; }
  bool finished() const { return finished_; }
  // Every task of the pass has been handed out (its tail: a task may be split for an idle
  // trainer).
  bool in_tail() const { return !finished_ && cursor_ >= tasks_; }
  int64_t tasks() const { return tasks_; }
  const TaskQueueOptions& options() const { return options_; }

  struct Stats {
    int64_t dispatches = 0;
    int64_t duplicates = 0;  // dispatches of a task already handed out in the same pass
    int64_t finishes = 0;
    int64_t failures = 0;  // Fail() accepted
    int64_t timeouts = 0;
    int64_t lost = 0;    // tasks returned because their trainer was lost
    int64_t splits = 0;  // pieces cut off pending tasks for idle trainers
  };
  const Stats& stats() const { return stats_; }

  struct FailedTask {
    int64_t task = 0;
    int pass = 0;
    int failures = 0;
    std::string reason;
  };
  // Tasks that failed for good, in every pass so far (bounded: the last 1000).
  const std::vector<FailedTask>& failed_history() const { return failed_history_; }
  // Pending dispatches (task -> trainer), for status.
  std::map<int64_t, std::string> PendingTrainers() const;
  // How many times each task was finished in each pass is up to the caller to count; this tells
  // whether a task is done in the current pass.
  bool IsDone(int64_t task) const { return done_[task]; }

  // The data position that goes with the model at version `v`, from every live trainer's report
  // at v (see master/position.h).
  StatusOr<DataPosition> PositionAt(int64_t v, const std::vector<TrainerPosition>& reports) const;
  // Forgets the remembered finishes at or before `v` (a position at v or later was saved).
  void ForgetFinishesThrough(int64_t v);
  // Puts the queue at `p` (the model was rolled back to p.version): tasks done there are done,
  // partly trained ones go first and skip what is in the model, the rest is todo. Stats stay.
  Status Rewind(const DataPosition& p, int64_t generation);
  // The rollback generation of the last Rewind (0: never).
  int64_t rewind_generation() const { return rewind_generation_; }

  // Compact binary snapshot (bitmaps for done and dispatched tasks: 100,000 tasks fit in about
  // 25 KB before compression). Deadlines are not kept: ResetDeadlines() after Restore().
  std::string Snapshot() const;
  static StatusOr<TaskQueue> Restore(TaskQueueOptions options, std::string_view snapshot);

 private:
  // Restore's sections, each read and checked as Snapshot writes it (task_queue_snapshot.cc).
  bool ReadTaskId(ByteReader& r, uint64_t* t) const;
  bool ReadItemId(ByteReader& r, uint64_t* t) const;
  Status ReadAssignments(ByteReader& r);
  Status ReadFailures(ByteReader& r);
  Status ReadRecentAndSkips(ByteReader& r);
  Status ReadLayout(ByteReader& r);
  Status ReadPieces(ByteReader& r);
  Status CheckWorkItems() const;

  struct Pending {
    int64_t epoch = 0;
    std::string trainer;
    int64_t deadline_ms = 0;
  };
  void StartPass(int pass);
  // Work item `task` as dispatched at `epoch`.
  Dispatched DispatchedOf(int64_t task, int64_t epoch, int64_t deadline_ms) const;
  // The task went back to todo after a failure of some kind.
  void Requeue(int64_t task, const std::string& reason);
  void MaybeEndPass();
  // Moves the cursor past tasks already handed out this pass (after a Rewind).
  void SkipDispatched();
  // The task a work item belongs to (itself, or a piece's).
  int64_t TaskOf(int64_t item) const { return item < tasks_ ? item : pieces_[item - tasks_].task; }
  // Records [start, end) of its task that work item `item` covers; end -1: to the task's end.
  std::pair<int64_t, int64_t> RangeOf(int64_t item) const;
  // Work item `item` is finished: its task is done once every part of it is.
  void ItemDone(int64_t item);

  TaskQueueOptions options_;
  std::vector<TaskSpan> spans_;  // what each task covers
  void SetPending(int64_t task, Pending p);
  void ErasePending(std::map<int64_t, Pending>::iterator it);
  void ClearPending();

  int64_t tasks_ = 0;
  int64_t shuffled_tasks_ = 0;  // the tasks of the chunks at the start (shuffled each pass)
  bool following_ = false;      // follow, and not stopped yet
  std::vector<int64_t> added_;  // records of the chunks added since the start
  int pass_ = 0;
  bool finished_ = false;
  std::vector<int64_t> order_;  // this pass's permutation of task ids
  int64_t cursor_ = 0;          // next untouched position in order_
  std::deque<int64_t> requeued_;
  std::map<int64_t, Pending> pending_;  // changed only by SetPending, ErasePending, ClearPending
  // pending_'s tasks by trainer, kept with it: a trainer's own tasks without a scan of every
  // trainer's (GetTask asks on every call: at 1,000 trainers two scans of 1,000 a call).
  std::unordered_map<std::string, std::set<int64_t>> held_by_;
  std::vector<bool> done_;
  std::vector<bool> dispatched_;
  std::map<int64_t, int> failures_;       // this pass
  std::map<int64_t, FailedTask> failed_;  // this pass
  std::vector<FailedTask> failed_history_;
  int64_t next_epoch_ = 1;
  Stats stats_;
  struct Finished {
    int64_t task = 0;
    int pass = 0;
    int64_t step = 0;
  };
  std::deque<Finished> recent_;      // finishes with a step, not yet covered by a saved position
  std::map<int64_t, int64_t> skip_;  // this pass: task -> records already in the model
  // Splits, this pass. A piece covers records [from, to) of its task; item -> where a split
  // item now ends; task -> its parts (itself and its pieces) not yet finished, once split.
  struct Piece {
    int64_t task = 0, from = 0, to = 0;
  };
  std::vector<Piece> pieces_;
  std::map<int64_t, int64_t> ends_;
  std::map<int64_t, int64_t> parts_left_;
  // Trainers whose last ask found nothing to do (a hint for splits; not saved).
  std::set<std::string> idle_;
  int64_t rewind_generation_ = 0;
};

}  // namespace tessera::master
