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

// Longer than our usual (170 lines), for a reason: a reader of a format reads best as the format
// is written (Snapshot, above), section by section in one order, each field checked where it is
// read; the later sections are those older snapshots lack.
StatusOr<TaskQueue> TaskQueue::Restore(TaskQueueOptions options, std::string_view snapshot) {
  auto corrupt = [](const std::string& what) { return Status::DataLoss("master state snapshot: " + what); };
  ByteReader r(snapshot);
  uint64_t magic, chunks, cpt, passes, seed, pass, finished, cursor, next_epoch;
  if (!r.GetVarint(&magic) || (magic != kSnapshotMagic && magic != kFollowMagic)) return corrupt("bad magic");
  if (!r.GetVarint(&chunks) || !r.GetVarint(&cpt) || !r.GetVarint(&passes) || !r.GetVarint(&seed)) {
    return corrupt("truncated header");
  }
  uint64_t following = 0;
  std::vector<int64_t> added;
  if (magic == kFollowMagic) {
    uint64_t n;
    if (!r.GetVarint(&following) || !r.GetVarint(&n) || n > r.remaining())
      return corrupt("bad chunks followed");
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t records;
      if (!r.GetVarint(&records)) return corrupt("bad chunk followed");
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
    if (Status s = q.AddChunks(added); !s.ok()) return corrupt(s.message());
    q.following_ = following != 0;
  }
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
  // A work item: a task or a piece (checked against the pieces once they are read).
  constexpr uint64_t kMostPieces = 1 << 24;
  auto item_id = [&](uint64_t* t) {
    return r.GetVarint(t) && *t < static_cast<uint64_t>(q.tasks_) + kMostPieces;
  };
  uint64_t n;
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_) + kMostPieces)
    return corrupt("bad requeue list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t;
    if (!item_id(&t)) return corrupt("bad requeued task");
    q.requeued_.push_back(static_cast<int64_t>(t));
  }
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_) + kMostPieces)
    return corrupt("bad pending list");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, e;
    std::string trainer;
    if (!item_id(&t) || !r.GetVarint(&e) || !r.GetString(&trainer)) return corrupt("bad pending task");
    q.pending_[static_cast<int64_t>(t)] = Pending{static_cast<int64_t>(e), trainer, 0};
  }
  if (!r.GetBits(&q.done_, static_cast<uint64_t>(q.tasks_)) ||
      static_cast<int64_t>(q.done_.size()) != q.tasks_ ||
      !r.GetBits(&q.dispatched_, static_cast<uint64_t>(q.tasks_)) ||
      static_cast<int64_t>(q.dispatched_.size()) != q.tasks_) {
    return corrupt("bad task bitmaps");
  }
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_) + kMostPieces)
    return corrupt("bad failure counts");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t t, f;
    if (!item_id(&t) || !r.GetVarint(&f)) return corrupt("bad failure count");
    q.failures_[static_cast<int64_t>(t)] = static_cast<int>(f);
  }
  auto get_failed = [&](FailedTask* f) {
    uint64_t t, p, c;
    if (!item_id(&t) || !r.GetVarint(&p) || !r.GetVarint(&c) || !r.GetString(&f->reason)) return false;
    f->task = static_cast<int64_t>(t);
    f->pass = static_cast<int>(p);
    f->failures = static_cast<int>(c);
    return true;
  };
  if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_) + kMostPieces)
    return corrupt("bad failed list");
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
  if (!r.done()) {
    uint64_t splits;
    if (!r.GetVarint(&splits) || !r.GetVarint(&n) || n > kMostPieces) return corrupt("bad pieces");
    q.stats_.splits = static_cast<int64_t>(splits);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t t, from, to;
      if (!task_id(&t) || !r.GetVarint(&from) || !r.GetVarint(&to) || from >= to) return corrupt("bad piece");
      q.pieces_.push_back(
          Piece{static_cast<int64_t>(t), static_cast<int64_t>(from), static_cast<int64_t>(to)});
    }
    for (auto* m : {&q.ends_, &q.parts_left_}) {
      if (!r.GetVarint(&n) || n > static_cast<uint64_t>(q.tasks_) + kMostPieces)
        return corrupt("bad split list");
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t k, v;
        if (!item_id(&k) || !r.GetVarint(&v)) return corrupt("bad split entry");
        (*m)[static_cast<int64_t>(k)] = static_cast<int64_t>(v);
      }
    }
  }
  if (!r.done()) return corrupt("stray bytes at the end");
  // Every work item named is a task or one of the pieces.
  const int64_t items = q.tasks_ + q.pieces();
  auto known = [&](int64_t item) { return item < items; };
  bool ok = std::all_of(q.requeued_.begin(), q.requeued_.end(), known) &&
            std::all_of(q.ends_.begin(), q.ends_.end(), [&](const auto& e) { return known(e.first); }) &&
            std::all_of(q.parts_left_.begin(), q.parts_left_.end(),
                        [&](const auto& e) { return e.first < q.tasks_; });
  for (const auto& [t, p] : q.pending_) ok = ok && known(t);
  for (const auto& [t, f] : q.failures_) ok = ok && known(t);
  for (const auto& [t, f] : q.failed_) ok = ok && known(t);
  if (!ok) return corrupt("a work item that is neither a task nor a piece");
  return q;
}

}  // namespace tessera::master
