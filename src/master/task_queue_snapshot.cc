// TaskQueue's snapshot (see task_queue.h): the queue's state in a compact binary form, and its
// restore with every field checked.
#include <algorithm>

#include "common/bytes.h"
#include "master/task_queue.h"

namespace tessera::master {

namespace {
constexpr uint64_t kSnapshotMagic = 0x54535131;  // "TSQ1"
// A queue that follows its data set: after the seed, whether it still follows and the records
// of the chunks added (the tasks they made must exist before the bitmaps are read).
constexpr uint64_t kFollowMagic = 0x54535132;  // "TSQ2"
// At most this many pieces a snapshot may name (their ids follow the tasks').
constexpr uint64_t kMostPieces = 1 << 24;

Status Corrupt(const std::string& what) { return Status::DataLoss("master state snapshot: " + what); }
}  // namespace

std::string TaskQueue::Snapshot() const {
  std::string out;
  ByteWriter w(&out);
  w.PutVarint(options_.follow ? kFollowMagic : kSnapshotMagic);
  w.PutVarint(static_cast<uint64_t>(options_.chunks));
  w.PutVarint(static_cast<uint64_t>(options_.chunks_per_task));
  w.PutVarint(static_cast<uint64_t>(options_.passes));
  w.PutVarint(options_.seed);
  if (options_.follow) {
    w.PutVarint(following_ ? 1 : 0);
    w.PutVarint(added_.size());
    for (int64_t n : added_) w.PutVarint(static_cast<uint64_t>(n));
  }
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
  // Added with task splits; older snapshots end before this.
  w.PutVarint(static_cast<uint64_t>(stats_.splits));
  w.PutVarint(pieces_.size());
  for (const auto& p : pieces_) {
    for (int64_t v : {p.task, p.from, p.to}) w.PutVarint(static_cast<uint64_t>(v));
  }
  for (const auto* m : {&ends_, &parts_left_}) {
    w.PutVarint(m->size());
    for (const auto& [k, v] : *m) {
      w.PutVarint(static_cast<uint64_t>(k));
      w.PutVarint(static_cast<uint64_t>(v));
    }
  }
  return out;
}

StatusOr<TaskQueue> TaskQueue::Restore(TaskQueueOptions options, std::string_view snapshot) {
  ByteReader r(snapshot);
  uint64_t magic, chunks, cpt, passes, seed, pass, finished, cursor, next_epoch;
  if (!r.GetVarint(&magic) || (magic != kSnapshotMagic && magic != kFollowMagic)) return Corrupt("bad magic");
  if (!r.GetVarint(&chunks) || !r.GetVarint(&cpt) || !r.GetVarint(&passes) || !r.GetVarint(&seed)) {
    return Corrupt("truncated header");
  }
  uint64_t following = 0;
  std::vector<int64_t> added;
  if (magic == kFollowMagic) {
    uint64_t n;
    if (!r.GetVarint(&following) || !r.GetVarint(&n) || n > r.remaining())
      return Corrupt("bad chunks followed");
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t records;
      if (!r.GetVarint(&records)) return Corrupt("bad chunk followed");
      added.push_back(static_cast<int64_t>(records));
    }
    options.follow = true;  // the saved queue decides
    options.split_min_records = 0;
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
  if (options.follow) {
    if (Status s = q.AddChunks(added); !s.ok()) return Corrupt(s.message());
    q.following_ = following != 0;
  }
  if (!r.GetVarint(&pass) || !r.GetVarint(&finished) || !r.GetVarint(&cursor) || !r.GetVarint(&next_epoch)) {
    return Corrupt("truncated state");
  }
  if (pass >= static_cast<uint64_t>(q.options_.passes) || cursor > static_cast<uint64_t>(q.tasks_)) {
    return Corrupt("pass or cursor out of range");
  }
  q.StartPass(static_cast<int>(pass));
  q.finished_ = finished != 0;
  q.cursor_ = static_cast<int64_t>(cursor);
  q.next_epoch_ = static_cast<int64_t>(next_epoch);
  // The sections in the order Snapshot writes them; the later ones are those older snapshots lack.
  TESSERA_RETURN_IF_ERROR(q.ReadAssignments(r));
  TESSERA_RETURN_IF_ERROR(q.ReadFailures(r));
  if (!r.done()) TESSERA_RETURN_IF_ERROR(q.ReadRecentAndSkips(r));
  if (!r.done()) TESSERA_RETURN_IF_ERROR(q.ReadLayout(r));
  if (!r.done()) TESSERA_RETURN_IF_ERROR(q.ReadPieces(r));
  if (!r.done()) return Corrupt("stray bytes at the end");
  TESSERA_RETURN_IF_ERROR(q.CheckWorkItems());
  return q;
}

bool TaskQueue::ReadTaskId(ByteReader& r, uint64_t* t) const {
  return r.GetVarint(t) && *t < static_cast<uint64_t>(tasks_);
}

// A work item: a task or a piece (checked against the pieces once they are read: CheckWorkItems).
bool TaskQueue::ReadItemId(ByteReader& r, uint64_t* t) const {
  return r.GetVarint(t) && *t < static_cast<uint64_t>(tasks_) + kMostPieces;
}

// The counters, the requeued and pending work, and which tasks are done and dispatched.
Status TaskQueue::ReadAssignments(ByteReader& r) {
  for (int64_t* v : {&stats_.dispatches, &stats_.duplicates, &stats_.finishes, &stats_.failures,
                     &stats_.timeouts, &stats_.lost}) {
    uint64_t x;
    if (!r.GetVarint(&x)) return Corrupt("truncated stats");
    *v = static_cast<int64_t>(x);
  }
  uint64_t n;
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(tasks_) + kMostPieces) return Corrupt("bad requeue list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t;
    if (!ReadItemId(r, &t)) return Corrupt("bad requeued task");
    requeued_.push_back(static_cast<int64_t>(t));
  }
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(tasks_) + kMostPieces) return Corrupt("bad pending list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, e;
    std::string trainer;
    if (!ReadItemId(r, &t) || !r.GetVarint(&e) || !r.GetString(&trainer)) return Corrupt("bad pending task");
    SetPending(static_cast<int64_t>(t), Pending{static_cast<int64_t>(e), trainer, 0});
  }
  if (!r.GetBits(&done_, static_cast<uint64_t>(tasks_)) || static_cast<int64_t>(done_.size()) != tasks_ ||
      !r.GetBits(&dispatched_, static_cast<uint64_t>(tasks_)) ||
      static_cast<int64_t>(dispatched_.size()) != tasks_) {
    return Corrupt("bad task bitmaps");
  }
  return Status::OK();
}

// Failure counts, the tasks failed for good, and the history of failures.
Status TaskQueue::ReadFailures(ByteReader& r) {
  uint64_t n;
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(tasks_) + kMostPieces)
    return Corrupt("bad failure counts");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, f;
    if (!ReadItemId(r, &t) || !r.GetVarint(&f)) return Corrupt("bad failure count");
    failures_[static_cast<int64_t>(t)] = static_cast<int>(f);
  }
  auto get_failed = [&](FailedTask* f) {
    uint64_t t, p, c;
    if (!ReadItemId(r, &t) || !r.GetVarint(&p) || !r.GetVarint(&c) || !r.GetString(&f->reason)) return false;
    f->task = static_cast<int64_t>(t);
    f->pass = static_cast<int>(p);
    f->failures = static_cast<int>(c);
    return true;
  };
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(tasks_) + kMostPieces) return Corrupt("bad failed list");
  for (uint64_t i = 0; i < n; ++i) {
    FailedTask f;
    if (!get_failed(&f)) return Corrupt("bad failed task");
    failed_[f.task] = f;
  }
  if (!r.GetVarint(&n) || n > 1000) return Corrupt("bad failure history");
  for (uint64_t i = 0; i < n; ++i) {
    FailedTask f;
    if (!get_failed(&f)) return Corrupt("bad failure history entry");
    failed_history_.push_back(f);
  }
  return Status::OK();
}

// The recent finishes, the records to skip in tasks, and the rewind generation.
Status TaskQueue::ReadRecentAndSkips(ByteReader& r) {
  uint64_t n;
  if (!r.GetVarint(&n) || n > 1000000) return Corrupt("bad recent finishes");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, p, st;
    if (!ReadTaskId(r, &t) || !r.GetVarint(&p) || !r.GetVarint(&st)) return Corrupt("bad recent finish");
    recent_.push_back(Finished{static_cast<int64_t>(t), static_cast<int>(p), static_cast<int64_t>(st)});
  }
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(tasks_)) return Corrupt("bad skip list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, k;
    if (!ReadTaskId(r, &t) || !r.GetVarint(&k)) return Corrupt("bad skip entry");
    skip_[static_cast<int64_t>(t)] = static_cast<int64_t>(k);
  }
  uint64_t g;
  if (!r.GetVarint(&g)) return Corrupt("bad rewind generation");
  rewind_generation_ = static_cast<int64_t>(g);
  return Status::OK();
}

// The task layout's settings: the saved queue must have as many tasks as these settings make.
Status TaskQueue::ReadLayout(ByteReader& r) {
  uint64_t min_tasks, min_records, tasks;
  if (!r.GetVarint(&min_tasks) || !r.GetVarint(&min_records) || !r.GetVarint(&tasks)) {
    return Corrupt("bad task layout");
  }
  if (static_cast<int64_t>(tasks) != tasks_) {
    return Status::FailedPrecondition("the saved task queue has " + std::to_string(tasks) +
                                      " tasks, these settings make " + std::to_string(tasks_) +
                                      " (--min-tasks / --min-task-records changed?)");
  }
  return Status::OK();
}

// The pieces tasks were split into, and each split task's ends and parts left.
Status TaskQueue::ReadPieces(ByteReader& r) {
  uint64_t splits, n;
  if (!r.GetVarint(&splits) || !r.GetVarint(&n) || n > kMostPieces) return Corrupt("bad pieces");
  stats_.splits = static_cast<int64_t>(splits);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, from, to;
    if (!ReadTaskId(r, &t) || !r.GetVarint(&from) || !r.GetVarint(&to) || from >= to)
      return Corrupt("bad piece");
    pieces_.push_back(Piece{static_cast<int64_t>(t), static_cast<int64_t>(from), static_cast<int64_t>(to)});
  }
  for (auto* m : {&ends_, &parts_left_}) {
    if (!r.GetVarint(&n) || n > static_cast<uint64_t>(tasks_) + kMostPieces) return Corrupt("bad split list");
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t k, v;
      if (!ReadItemId(r, &k) || !r.GetVarint(&v)) return Corrupt("bad split entry");
      (*m)[static_cast<int64_t>(k)] = static_cast<int64_t>(v);
    }
  }
  return Status::OK();
}

// Every work item named is a task or one of the pieces.
Status TaskQueue::CheckWorkItems() const {
  const int64_t items = tasks_ + pieces();
  auto known = [&](int64_t item) { return item < items; };
  bool ok =
      std::all_of(requeued_.begin(), requeued_.end(), known) &&
      std::all_of(ends_.begin(), ends_.end(), [&](const auto& e) { return known(e.first); }) &&
      std::all_of(parts_left_.begin(), parts_left_.end(), [&](const auto& e) { return e.first < tasks_; });
  for (const auto& [t, p] : pending_) ok = ok && known(t);
  for (const auto& [t, f] : failures_) ok = ok && known(t);
  for (const auto& [t, f] : failed_) ok = ok && known(t);
  return ok ? Status::OK() : Corrupt("a work item that is neither a task nor a piece");
}

}  // namespace tessera::master
