// TaskQueue (see task_queue.h).
#include "master/task_queue.h"

#include <algorithm>
#include <random>
#include <set>

#include "common/hash.h"

namespace tessera::master {

Status TaskQueueOptions::Validate() const {
  if (chunks < 1) return Status::InvalidArgument("the data set has no chunks");
  if (chunks_per_task < 1) return Status::InvalidArgument("--chunks-per-task must be >= 1");
  if (timeout_ms < 1) return Status::InvalidArgument("--task-timeout must be positive");
  if (max_failures < 0) return Status::InvalidArgument("--max-failures must be >= 0");
  if (passes < 1) return Status::InvalidArgument("--passes must be >= 1");
  if (!chunk_records.empty() && static_cast<int64_t>(chunk_records.size()) != chunks) {
    return Status::InvalidArgument("record counts of " + std::to_string(chunk_records.size()) +
                                   " chunks for " + std::to_string(chunks) + " chunks");
  }
  if (follow && passes != 1) return Status::InvalidArgument("a job that follows its data set has one pass");
  if (follow && split_min_records > 0)
    return Status::InvalidArgument("a job that follows its data set does not split tasks");
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
  shuffled_tasks_ = tasks_;
  following_ = options_.follow;
  StartPass(0);
}

void TaskQueue::StartPass(int pass) {
  pass_ = pass;
  order_.resize(tasks_);
  for (int64_t i = 0; i < tasks_; ++i) order_[i] = i;
  // A seeded shuffle of our own (std::shuffle's algorithm is unspecified across libraries).
  // Tasks of chunks added while following keep their order, after the others.
  uint64_t state = HashCombine(options_.seed, static_cast<uint64_t>(pass));
  for (int64_t i = shuffled_tasks_ - 1; i > 0; --i) {
    state = Mix64(state);
    int64_t j = static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
  cursor_ = 0;
  requeued_.clear();
  ClearPending();
  done_.assign(tasks_, false);
  dispatched_.assign(tasks_, false);
  failures_.clear();
  failed_.clear();
  skip_.clear();
  pieces_.clear();
  ends_.clear();
  parts_left_.clear();
  idle_.clear();
}

std::pair<int64_t, int64_t> TaskQueue::RangeOf(int64_t item) const {
  auto cut = ends_.find(item);
  if (item < tasks_) {
    auto s = skip_.find(item);
    return {s == skip_.end() ? 0 : s->second, cut == ends_.end() ? -1 : cut->second};
  }
  const Piece& p = pieces_[static_cast<size_t>(item - tasks_)];
  return {p.from, cut == ends_.end() ? p.to : cut->second};
}

void TaskQueue::ItemDone(int64_t item) {
  const int64_t task = TaskOf(item);
  auto parts = parts_left_.find(task);
  if (parts == parts_left_.end()) {
    done_[task] = true;
  } else if (--parts->second == 0) {
    done_[task] = true;
    parts_left_.erase(parts);
  }
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
    idle_.insert(trainer);
    n.kind = NextKind::kWait;
    return n;
  }
  idle_.erase(trainer);
  int64_t epoch = next_epoch_++;
  SetPending(task, Pending{epoch, trainer, now_ms + options_.timeout_ms});
  ++stats_.dispatches;
  if (task < tasks_) {
    if (dispatched_[task]) ++stats_.duplicates;
    dispatched_[task] = true;
  }
  n.kind = NextKind::kTask;
  n.task = DispatchedOf(task, epoch, now_ms + options_.timeout_ms);
  return n;
}

TaskQueue::Dispatched TaskQueue::DispatchedOf(int64_t task, int64_t epoch, int64_t deadline_ms) const {
  Dispatched d;
  d.task = task;
  d.epoch = epoch;
  d.pass = pass_;
  const TaskSpan& span = spans_[static_cast<size_t>(TaskOf(task))];
  d.first_chunk = span.first_chunk;
  d.chunks = span.chunks;
  d.first_record = span.first_record;
  d.records = span.records;
  d.deadline_ms = deadline_ms;
  const auto [from, end] = RangeOf(task);
  d.skip_records = from;
  d.end_record = end > 0 ? end : 0;
  return d;
}

std::optional<TaskQueue::Dispatched> TaskQueue::Undelivered(const std::string& trainer,
                                                            const std::set<std::pair<int64_t, int64_t>>& held,
                                                            int64_t now_ms) {
  auto mine = held_by_.find(trainer);
  if (mine == held_by_.end()) return std::nullopt;
  for (int64_t task : mine->second) {  // in task order, as pending_ is
    Pending& p = pending_.at(task);
    if (held.count({task, p.epoch})) continue;
    p.deadline_ms = now_ms + options_.timeout_ms;  // a fresh deadline, as a dispatch gets
    idle_.erase(trainer);
    return DispatchedOf(task, p.epoch, p.deadline_ms);
  }
  return std::nullopt;
}

bool TaskQueue::HoldBackAhead(const std::string& trainer, const std::set<std::string>& live) const {
  if (!held_by_.count(trainer)) return false;
  // What Dispatch could hand out now (counting a task dispatched ahead of its turn too: at
  // worst we hold back less).
  const int64_t left = static_cast<int64_t>(requeued_.size()) + (tasks_ - cursor_);
  // More left than live trainers: more than those without a task, whoever they are (the
  // common case, answered without counting them).
  if (left > static_cast<int64_t>(live.size())) return false;
  int64_t without = 0;
  for (const auto& t : live) without += t != trainer && !held_by_.count(t);
  return without > 0 && left <= without;
}

bool TaskQueue::OthersHold(const std::string& trainer) const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const auto& p) { return p.second.trainer != trainer; });
}

bool TaskQueue::Finish(int64_t task, int64_t epoch, int64_t step) {
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch) return false;
  ErasePending(it);
  ItemDone(task);
  if (step >= 0 && task < tasks_) {
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
  ErasePending(it);
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
  ErasePending(it);
  ++stats_.timeouts;
  Requeue(task, "timed out at trainer " + trainer);
  MaybeEndPass();
  return true;
}

bool TaskQueue::Progressed(int64_t task, int64_t epoch, int64_t now_ms) {
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch) return false;
  it->second.deadline_ms = std::max(it->second.deadline_ms, now_ms + options_.timeout_ms);
  return true;
}

int TaskQueue::TrainerLost(const std::string& trainer) {
  idle_.erase(trainer);
  std::vector<int64_t> lost;
  if (auto mine = held_by_.find(trainer); mine != held_by_.end())
    lost.assign(mine->second.begin(), mine->second.end());
  for (int64_t t : lost) {
    ErasePending(pending_.find(t));
    ++stats_.lost;
    Requeue(t, "trainer " + trainer + " was lost");
  }
  if (!lost.empty()) MaybeEndPass();
  return static_cast<int>(lost.size());
}

std::vector<int64_t> TaskQueue::ProposeSplit(int64_t task, int64_t epoch, int64_t offset,
                                             int64_t records) const {
  const int64_t least = options_.split_min_records;
  if (least <= 0 || finished_ || cursor_ < tasks_) return {};
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch) return {};
  // Idle trainers that the work already waiting will not keep busy.
  int64_t idle = -static_cast<int64_t>(requeued_.size());
  for (const auto& t : idle_) idle += t != it->second.trainer;
  auto [from, end] = RangeOf(task);
  end = end < 0 ? records : std::min(end, records);
  if (idle <= 0 || offset < from || offset > end) return {};
  // The rest in equal parts of at least `least` records: the holder's and one per idle trainer.
  const int64_t rest = end - offset;
  const int64_t parts = std::min(idle + 1, rest / least);
  if (parts < 2) return {};
  std::vector<int64_t> cuts;
  for (int64_t k = parts - 1; k >= 1; --k) cuts.push_back(offset + rest * k / parts);
  return cuts;
}

int64_t TaskQueue::Split(int64_t task, int64_t epoch, int64_t cut, int64_t records) {
  constexpr size_t kMostPieces = 1 << 24;
  auto it = pending_.find(task);
  if (it == pending_.end() || it->second.epoch != epoch || pieces_.size() >= kMostPieces) return -1;
  auto [from, end] = RangeOf(task);
  if (end < 0) end = records;
  if (cut <= from || cut >= end) return -1;
  const int64_t whole = TaskOf(task);
  ends_[task] = cut;
  const int64_t id = tasks_ + static_cast<int64_t>(pieces_.size());
  pieces_.push_back(Piece{whole, cut, end});
  requeued_.push_front(id);
  auto parts = parts_left_.find(whole);
  if (parts == parts_left_.end()) {
    parts_left_[whole] = 2;
  } else {
    ++parts->second;
  }
  ++stats_.splits;
  return id;
}

void TaskQueue::ResetDeadlines(int64_t now_ms) {
  for (auto& [task, p] : pending_) p.deadline_ms = now_ms + options_.timeout_ms;
}

void TaskQueue::MaybeEndPass() {
  SkipDispatched();
  if (finished_ || following_ || !requeued_.empty() || cursor_ < tasks_ || !pending_.empty()) return;
  if (pass_ + 1 < options_.passes) {
    StartPass(pass_ + 1);
  } else {
    finished_ = true;
  }
}

TaskQueue::Counts TaskQueue::counts() const {
  // Of tasks, not work items: a split task is failed if a part of it failed for good, else
  // pending while a part is handed out, else done once every part is.
  std::set<int64_t> failed, pending;
  for (const auto& [item, f] : failed_) failed.insert(TaskOf(item));
  for (const auto& [item, p] : pending_) {
    if (!failed.count(TaskOf(item))) pending.insert(TaskOf(item));
  }
  Counts c;
  c.failed = static_cast<int64_t>(failed.size());
  c.pending = static_cast<int64_t>(pending.size());
  for (bool d : done_) c.done += d;
  c.todo = finished_ ? 0 : tasks_ - c.done - c.pending - c.failed;
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

void TaskQueue::SetPending(int64_t task, Pending p) {
  if (auto was = pending_.find(task); was != pending_.end()) ErasePending(was);
  held_by_[p.trainer].insert(task);
  pending_.emplace(task, std::move(p));
}

void TaskQueue::ErasePending(std::map<int64_t, Pending>::iterator it) {
  auto mine = held_by_.find(it->second.trainer);
  mine->second.erase(it->first);
  if (mine->second.empty()) held_by_.erase(mine);
  pending_.erase(it);
}

void TaskQueue::ClearPending() {
  pending_.clear();
  held_by_.clear();
}

}  // namespace tessera::master
