// TaskQueue (see task_queue.h).
#include "master/task_queue.h"

#include <algorithm>
#include <random>
#include <set>

#include "common/bytes.h"
#include "common/hash.h"

namespace tessera::master {

Status TaskQueueOptions::Validate() const {
  if (chunks < 1) return Status::InvalidArgument("the data set has no chunks");
  if (chunks_per_task < 1) return Status::InvalidArgument("--chunks-per-task must be >= 1");
  if (timeout_ms < 1) return Status::InvalidArgument("--task-timeout must be positive");
  if (max_failures < 0) return Status::InvalidArgument("--max-failures must be >= 0");
  if (passes < 1) return Status::InvalidArgument("--passes must be >= 1");
  if (!chunk_records.empty() && static_cast<int64_t>(chunk_records.size()) != chunks) {
    return Status::InvalidArgument("record counts of " + std::to_string(chunk_records.size()) + " chunks for " +
                                   std::to_string(chunks) + " chunks");
  }
  if (min_tasks < 0) return Status::InvalidArgument("--min-tasks must be >= 0");
  if (min_task_records < 1) return Status::InvalidArgument("--min-task-records must be >= 1");
  return Status::OK();
}

TaskQueue::TaskQueue(TaskQueueOptions options) : options_(std::move(options)) {
  if (options_.chunk_records.empty()) {
    for (int64_t c = 0; c < options_.chunks; c += options_.chunks_per_task) {
      spans_.push_back({c, std::min<int64_t>(options_.chunks_per_task, options_.chunks - c), 0, 0});
    }
  } else {
    spans_ = LayoutTasks(
        {options_.chunk_records, options_.chunks_per_task, options_.min_tasks, options_.min_task_records});
  }
  tasks_ = static_cast<int64_t>(spans_.size());
  StartPass(0);
}

void TaskQueue::StartPass(int pass) {
  pass_ = pass;
  order_.resize(tasks_);
  for (int64_t i = 0; i < tasks_; ++i) order_[i] = i;
  // A seeded shuffle of our own (std::shuffle's algorithm is unspecified across libraries).
  uint64_t state = HashCombine(options_.seed, static_cast<uint64_t>(pass));
  for (int64_t i = tasks_ - 1; i > 0; --i) {
    state = Mix64(state);
    int64_t j = static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
  cursor_ = 0;
  requeued_.clear();
  pending_.clear();
  done_.assign(tasks_, false);
  dispatched_.assign(tasks_, false);
  failures_.clear();
  failed_.clear();
  skip_.clear();
}

void TaskQueue::SkipDispatched() {
  while (cursor_ < tasks_ && dispatched_[order_[cursor_]]) ++cursor_;
}

TaskQueue::Next TaskQueue::Dispatch(const std::string& trainer, int64_t now_ms) {
  Next n;
  if (finished_) {
    n.kind = NextKind::kFinished;
    return n;
  }
  int64_t task;
  SkipDispatched();
  if (!requeued_.empty()) {
    task = requeued_.front();
    requeued_.pop_front();
  } else if (cursor_ < tasks_) {
    task = order_[cursor_++];
  } else {
    n.kind = NextKind::kWait;
    return n;
  }
  int64_t epoch = next_epoch_++;
  pending_[task] = Pending{epoch, trainer, now_ms + options_.timeout_ms};
  ++stats_.dispatches;
  if (dispatched_[task]) ++stats_.duplicates;
  dispatched_[task] = true;
  n.kind = NextKind::kTask;
  n.task.task = task;
  n.task.epoch = epoch;
  n.task.pass = pass_;
  const TaskSpan& span = spans_[static_cast<size_t>(task)];
  n.task.first_chunk = span.first_chunk;
  n.task.chunks = span.chunks;
  n.task.first_record = span.first_record;
  n.task.records = span.records;
  n.task.deadline_ms = now_ms + options_.timeout_ms;
  if (auto s = skip_.find(task); s != skip_.end()) n.task.skip_records = s->second;
  return n;
}

bool TaskQueue::Finish(int64_t task, int64_t epoch, int64_t step) {
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch) return false;
  pending_.erase(it);
  done_[task] = true;
  if (step >= 0) {
    recent_.push_back(Finished{task, pass_, step});
    // Bounded: without saved positions nothing is forgotten otherwise.
    if (recent_.size() > 1000000) recent_.pop_front();
  }
  ++stats_.finishes;
  MaybeEndPass();
  return true;
}

void TaskQueue::Requeue(int64_t task, const std::string& reason) {
  int f = ++failures_[task];
  if (f > options_.max_failures) {
    FailedTask ft{task, pass_, f, reason};
    failed_[task] = ft;
    failed_history_.push_back(ft);
    if (failed_history_.size() > 1000) failed_history_.erase(failed_history_.begin());
  } else {
    requeued_.push_back(task);
  }
}

bool TaskQueue::Fail(int64_t task, int64_t epoch, const std::string& reason) {
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch) return false;
  pending_.erase(it);
  ++stats_.failures;
  Requeue(task, reason.empty() ? "failed" : reason);
  MaybeEndPass();
  return true;
}

std::vector<std::pair<int64_t, int64_t>> TaskQueue::Overdue(int64_t now_ms) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [task, p] : pending_) {
    if (p.deadline_ms <= now_ms) out.emplace_back(task, p.epoch);
  }
  return out;
}

bool TaskQueue::Expire(int64_t task, int64_t epoch) {
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch) return false;
  std::string trainer = it->second.trainer;
  pending_.erase(it);
  ++stats_.timeouts;
  Requeue(task, "timed out at trainer " + trainer);
  MaybeEndPass();
  return true;
}

int TaskQueue::TrainerLost(const std::string& trainer) {
  std::vector<int64_t> lost;
  for (const auto& [task, p] : pending_) {
    if (p.trainer == trainer) lost.push_back(task);
  }
  for (int64_t t : lost) {
    pending_.erase(t);
    ++stats_.lost;
    Requeue(t, "trainer " + trainer + " was lost");
  }
  if (!lost.empty()) MaybeEndPass();
  return static_cast<int>(lost.size());
}

void TaskQueue::ResetDeadlines(int64_t now_ms) {
  for (auto& [task, p] : pending_) p.deadline_ms = now_ms + options_.timeout_ms;
}

void TaskQueue::MaybeEndPass() {
  SkipDispatched();
  if (finished_ || !requeued_.empty() || cursor_ < tasks_ || !pending_.empty()) return;
  if (pass_ + 1 < options_.passes) {
    StartPass(pass_ + 1);
  } else {
    finished_ = true;
  }
}

TaskQueue::Counts TaskQueue::counts() const {
  Counts c;
  c.pending = static_cast<int64_t>(pending_.size());
  c.failed = static_cast<int64_t>(failed_.size());
  for (bool d : done_) c.done += d;
  c.todo = static_cast<int64_t>(requeued_.size());
  for (int64_t i = cursor_; i < tasks_; ++i) c.todo += !dispatched_[order_[i]];
  if (finished_) c.todo = 0;
  return c;
}

std::map<int64_t, std::string> TaskQueue::PendingTrainers() const {
  std::map<int64_t, std::string> out;
  for (const auto& [t, p] : pending_) out[t] = p.trainer;
  return out;
}

// ---- Positions and rewinds ------------------------------------------------------------------

StatusOr<DataPosition> TaskQueue::PositionAt(int64_t v, const std::vector<TrainerPosition>& reports) const {
  // The pass at v: the earliest one that still had records trained after v (a finish after v, or
  // a task in part); if none, the current one.
  int pass = pass_;
  for (const auto& f : recent_) {
    if (f.step > v) pass = std::min(pass, f.pass);
  }
  for (const auto& r : reports) {
    for (const auto& t : r.tasks) {
      if (t.offset > 0 && t.offset < t.records) pass = std::min(pass, t.pass);
    }
  }
  DataPosition p;
  p.version = v;
  p.pass = pass;
  // An earlier pass ended after v: every task of it ended done (or failed for good).
  p.done = pass < pass_ ? std::vector<bool>(static_cast<size_t>(tasks_), true) : done_;
  for (const auto& f : recent_) {
    if (f.pass == pass && f.step > v) p.done[static_cast<size_t>(f.task)] = false;
  }
  std::set<int64_t> seen;
  for (const auto& r : reports) {
    for (const auto& t : r.tasks) {
      if (t.pass != pass || t.task < 0 || t.task >= tasks_ || !seen.insert(t.task).second) continue;
      if (t.offset >= t.records) {
        p.done[static_cast<size_t>(t.task)] = true;  // all in the model, acknowledged later
      } else if (t.offset > 0) {
        p.done[static_cast<size_t>(t.task)] = false;
        p.partial.emplace_back(t.task, t.offset);
      }
    }
  }
  return p;
}

void TaskQueue::ForgetFinishesThrough(int64_t v) {
  std::erase_if(recent_, [v](const Finished& f) { return f.step <= v; });
}

Status TaskQueue::Rewind(const DataPosition& p, int64_t generation) {
  if (static_cast<int64_t>(p.done.size()) != tasks_) {
    return Status::InvalidArgument("position has " + std::to_string(p.done.size()) + " tasks, the queue " +
                                   std::to_string(tasks_));
  }
  if (p.pass < 0 || p.pass >= options_.passes) {
    return Status::InvalidArgument("position is in pass " + std::to_string(p.pass + 1) + " of " +
                                   std::to_string(options_.passes));
  }
  finished_ = false;
  StartPass(p.pass);
  for (int64_t t = 0; t < tasks_; ++t) {
    if (p.done[static_cast<size_t>(t)]) done_[t] = dispatched_[t] = true;
  }
  for (const auto& [t, records] : p.partial) {
    if (t < 0 || t >= tasks_ || dispatched_[t]) continue;
    dispatched_[t] = true;
    requeued_.push_back(t);
    skip_[t] = records;
  }
  recent_.clear();
  rewind_generation_ = generation;
  MaybeEndPass();
  return Status::OK();
}

// ---- Snapshot -------------------------------------------------------------------------------

namespace {
constexpr uint64_t kSnapshotMagic = 0x54535131;  // "TSQ1"
}

std::string TaskQueue::Snapshot() const {
  std::string out;
  ByteWriter w(&out);
  w.PutVarint(kSnapshotMagic);
  w.PutVarint(static_cast<uint64_t>(options_.chunks));
  w.PutVarint(static_cast<uint64_t>(options_.chunks_per_task));
  w.PutVarint(static_cast<uint64_t>(options_.passes));
  w.PutVarint(options_.seed);
  w.PutVarint(static_cast<uint64_t>(pass_));
  w.PutVarint(finished_ ? 1 : 0);
  w.PutVarint(static_cast<uint64_t>(cursor_));
  w.PutVarint(static_cast<uint64_t>(next_epoch_));
  for (int64_t v : {stats_.dispatches, stats_.duplicates, stats_.finishes, stats_.failures, stats_.timeouts,
                    stats_.lost}) {
    w.PutVarint(static_cast<uint64_t>(v));
  }
  w.PutVarint(requeued_.size());
  for (int64_t t : requeued_) w.PutVarint(static_cast<uint64_t>(t));
  w.PutVarint(pending_.size());
  for (const auto& [t, p] : pending_) {
    w.PutVarint(static_cast<uint64_t>(t));
    w.PutVarint(static_cast<uint64_t>(p.epoch));
    w.PutString(p.trainer);
  }
  w.PutBits(done_);
  w.PutBits(dispatched_);
  w.PutVarint(failures_.size());
  for (const auto& [t, f] : failures_) {
    w.PutVarint(static_cast<uint64_t>(t));
    w.PutVarint(static_cast<uint64_t>(f));
  }
  auto put_failed = [&](const FailedTask& f) {
    w.PutVarint(static_cast<uint64_t>(f.task));
    w.PutVarint(static_cast<uint64_t>(f.pass));
    w.PutVarint(static_cast<uint64_t>(f.failures));
    w.PutString(f.reason.substr(0, 200));
  };
  w.PutVarint(failed_.size());
  for (const auto& [t, f] : failed_) put_failed(f);
  w.PutVarint(failed_history_.size());
  for (const auto& f : failed_history_) put_failed(f);
  // Added with consistent checkpoints; older snapshots end before this.
  w.PutVarint(recent_.size());
  for (const auto& f : recent_) {
    w.PutVarint(static_cast<uint64_t>(f.task));
    w.PutVarint(static_cast<uint64_t>(f.pass));
    w.PutVarint(static_cast<uint64_t>(f.step));
  }
  w.PutVarint(skip_.size());
  for (const auto& [t, n] : skip_) {
    w.PutVarint(static_cast<uint64_t>(t));
    w.PutVarint(static_cast<uint64_t>(n));
  }
  w.PutVarint(static_cast<uint64_t>(rewind_generation_));
  // Added with record-range tasks; older snapshots end before this.
  w.PutVarint(static_cast<uint64_t>(options_.min_tasks));
  w.PutVarint(static_cast<uint64_t>(options_.min_task_records));
  w.PutVarint(static_cast<uint64_t>(tasks_));
  return out;
}

StatusOr<TaskQueue> TaskQueue::Restore(TaskQueueOptions options, std::string_view snapshot) {
  auto corrupt = [](const std::string& what) { return Status::DataLoss("master state snapshot: " + what); };
  ByteReader r(snapshot);
  uint64_t magic, chunks, cpt, passes, seed, pass, finished, cursor, next_epoch;
  if (!r.GetVarint(&magic) || magic != kSnapshotMagic) return corrupt("bad magic");
  if (!r.GetVarint(&chunks) || !r.GetVarint(&cpt) || !r.GetVarint(&passes) || !r.GetVarint(&seed)) {
    return corrupt("truncated header");
  }
  if (static_cast<int64_t>(chunks) != options.chunks || static_cast<int>(cpt) != options.chunks_per_task ||
      seed != options.seed) {
    return Status::FailedPrecondition(
        "the saved task queue was made for another data set or settings (" + std::to_string(chunks) +
        " chunks, " + std::to_string(cpt) + " per task, seed " + std::to_string(seed) + "; now " +
        std::to_string(options.chunks) + " chunks, " + std::to_string(options.chunks_per_task) +
        " per task, seed " + std::to_string(options.seed) + ")");
  }
  options.passes = static_cast<int>(std::max<uint64_t>(passes, static_cast<uint64_t>(options.passes)));
  TaskQueue q(options);
  if (!r.GetVarint(&pass) || !r.GetVarint(&finished) || !r.GetVarint(&cursor) || !r.GetVarint(&next_epoch)) {
    return corrupt("truncated state");
  }
  if (pass >= static_cast<uint64_t>(q.options_.passes) || cursor > static_cast<uint64_t>(q.tasks_)) {
    return corrupt("pass or cursor out of range");
  }
  q.StartPass(static_cast<int>(pass));
  q.finished_ = finished != 0;
  q.cursor_ = static_cast<int64_t>(cursor);
  q.next_epoch_ = static_cast<int64_t>(next_epoch);
  for (int64_t* v : {&q.stats_.dispatches, &q.stats_.duplicates, &q.stats_.finishes, &q.stats_.failures,
                     &q.stats_.timeouts, &q.stats_.lost}) {
    uint64_t x;
    if (!r.GetVarint(&x)) return corrupt("truncated stats");
    *v = static_cast<int64_t>(x);
  }
  auto task_id = [&](uint64_t* t) { return r.GetVarint(t) && *t < static_cast<uint64_t>(q.tasks_); };
  uint64_t n;
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_)) return corrupt("bad requeue list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t;
    if (!task_id(&t)) return corrupt("bad requeued task");
    q.requeued_.push_back(static_cast<int64_t>(t));
  }
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_)) return corrupt("bad pending list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, e;
    std::string trainer;
    if (!task_id(&t) || !r.GetVarint(&e) || !r.GetString(&trainer)) return corrupt("bad pending task");
    q.pending_[static_cast<int64_t>(t)] = Pending{static_cast<int64_t>(e), trainer, 0};
  }
  if (!r.GetBits(&q.done_, static_cast<uint64_t>(q.tasks_)) ||
      static_cast<int64_t>(q.done_.size()) != q.tasks_ ||
      !r.GetBits(&q.dispatched_, static_cast<uint64_t>(q.tasks_)) ||
      static_cast<int64_t>(q.dispatched_.size()) != q.tasks_) {
    return corrupt("bad task bitmaps");
  }
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_)) return corrupt("bad failure counts");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, f;
    if (!task_id(&t) || !r.GetVarint(&f)) return corrupt("bad failure count");
    q.failures_[static_cast<int64_t>(t)] = static_cast<int>(f);
  }
  auto get_failed = [&](FailedTask* f) {
    uint64_t t, p, c;
    if (!task_id(&t) || !r.GetVarint(&p) || !r.GetVarint(&c) || !r.GetString(&f->reason)) return false;
    f->task = static_cast<int64_t>(t);
    f->pass = static_cast<int>(p);
    f->failures = static_cast<int>(c);
    return true;
  };
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_)) return corrupt("bad failed list");
  for (uint64_t i = 0; i < n; ++i) {
    FailedTask f;
    if (!get_failed(&f)) return corrupt("bad failed task");
    q.failed_[f.task] = f;
  }
  if (!r.GetVarint(&n) || n > 1000) return corrupt("bad failure history");
  for (uint64_t i = 0; i < n; ++i) {
    FailedTask f;
    if (!get_failed(&f)) return corrupt("bad failure history entry");
    q.failed_history_.push_back(f);
  }
  if (!r.done()) {
    if (!r.GetVarint(&n) || n > 1000000) return corrupt("bad recent finishes");
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t t, p, st;
      if (!task_id(&t) || !r.GetVarint(&p) || !r.GetVarint(&st)) return corrupt("bad recent finish");
      q.recent_.push_back(Finished{static_cast<int64_t>(t), static_cast<int>(p), static_cast<int64_t>(st)});
    }
    if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_)) return corrupt("bad skip list");
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t t, k;
      if (!task_id(&t) || !r.GetVarint(&k)) return corrupt("bad skip entry");
      q.skip_[static_cast<int64_t>(t)] = static_cast<int64_t>(k);
    }
    uint64_t g;
    if (!r.GetVarint(&g)) return corrupt("bad rewind generation");
    q.rewind_generation_ = static_cast<int64_t>(g);
  }
  if (!r.done()) {
    uint64_t min_tasks, min_records, tasks;
    if (!r.GetVarint(&min_tasks) || !r.GetVarint(&min_records) || !r.GetVarint(&tasks)) {
      return corrupt("bad task layout");
    }
    if (static_cast<int64_t>(tasks) != q.tasks_) {
      return Status::FailedPrecondition("the saved task queue has " + std::to_string(tasks) +
                                        " tasks, these settings make " + std::to_string(q.tasks_) +
                                        " (--min-tasks / --min-task-records changed?)");
    }
  }
  if (!r.done()) return corrupt("stray bytes at the end");
  return q;
}

}  // namespace tessera::master
