// Consistency state machine (see consistency.h).
#include "pserver/consistency.h"

#include <algorithm>

#include "common/logging.h"
#include "common/strings.h"
#include "pserver/step_pieces.h"

namespace tessera {

bool TrainerIdLess(const std::string& a, const std::string& b) {
  auto na = ParseInt64(a, "");
  auto nb = ParseInt64(b, "");
  if (na.ok() && nb.ok()) return *na < *nb;
  if (na.ok() != nb.ok()) return na.ok();
  return a < b;
}

Consistency::Consistency(Options options, int64_t version) : Consistency(options, version, version > 0) {}

Consistency::Consistency(Options options, int64_t version, bool mid_job)
    : options_(options), version_(version) {
  // A pserver restored or re-initialized mid-job joins a group that formed long ago: waiting for
  // `min_trainers` again could wait for trainers that already left, and a step nobody takes part
  // in must close (below) however old the checkpoint (version 0 too: a job killed before this
  // pserver wrote a newer one, while another did).
  started_ = mid_job;
  clock_floor_ = version;
  if (options_.mode.kind != ConsistencyMode::Kind::kSync) clock_floor_ = 0;
}

std::string Consistency::StepMsg(int64_t v) { return "step " + std::to_string(v); }

int64_t Consistency::EligibleCount() const {
  int64_t n = 0;
  for (const auto& [id, m] : members_) n += m.start <= version_;
  return n;
}

int64_t Consistency::min_clock() const {
  if (options_.mode.kind != ConsistencyMode::Kind::kSsp) return version_;
  if (members_.empty()) return clock_floor_;
  int64_t m = INT64_MAX;
  for (const auto& [id, mem] : members_) m = std::min(m, mem.start);
  return m;
}

std::vector<std::string> Consistency::members() const {
  std::vector<std::string> out;
  for (const auto& [id, m] : members_) out.push_back(id);
  std::sort(out.begin(), out.end(), TrainerIdLess);
  return out;
}

StatusOr<int64_t> Consistency::Join(const std::string& trainer, int64_t epoch, int64_t requested) {
  TESSERA_CHECK(!applying_);
  auto it = members_.find(trainer);
  if (it != members_.end() && it->second.epoch > epoch) {
    return Status::FailedPrecondition("trainer " + trainer + " joined with epoch " + std::to_string(epoch) +
                                      ", older than its current registration (epoch " +
                                      std::to_string(it->second.epoch) + ")");
  }
  if (it != members_.end() && it->second.epoch < epoch) {
    Leave(trainer, it->second.epoch);  // an older incarnation of the same id
    it = members_.end();
  }
  requested = std::max<int64_t>(requested, 0);
  int64_t start = requested;
  if (it != members_.end()) {
    start = std::max(it->second.start, requested);  // a start step never goes down
  } else if (options_.mode.kind == ConsistencyMode::Kind::kSync) {
    // One contribution per trainer id per step: an id that already pushed for the open step
    // (an earlier incarnation) takes part from the next one.
    bool open =
        ((pushed_.empty() && !pieces_begun_) || (!started_ && EligibleCount() < options_.min_trainers)) &&
        pushed_.count(trainer) == 0;
    start = std::max(requested, open ? version_ : version_ + 1);
  } else if (options_.mode.kind == ConsistencyMode::Kind::kSsp) {
    start = std::max(requested, min_clock());  // a newcomer starts at the slowest clock
  }
  members_[trainer] = Member{epoch, start};
  if (options_.mode.kind == ConsistencyMode::Kind::kSsp &&
      static_cast<int>(members_.size()) >= options_.min_trainers) {
    started_ = true;
  }
  if (options_.mode.kind == ConsistencyMode::Kind::kSync) MaybeCompleteBarrier();
  if (options_.mode.kind == ConsistencyMode::Kind::kSsp) ReleasePulls();
  return start;
}

void Consistency::Leave(const std::string& trainer, int64_t epoch) {
  TESSERA_CHECK(!applying_);
  auto it = members_.find(trainer);
  if (it == members_.end() || (epoch != 0 && it->second.epoch != epoch)) return;
  if (options_.mode.kind == ConsistencyMode::Kind::kSsp && members_.size() == 1)
    clock_floor_ = it->second.start;
  members_.erase(it);
  async_pieces_.erase(trainer);
  if (options_.mode.kind == ConsistencyMode::Kind::kSync) MaybeCompleteBarrier();
  if (options_.mode.kind == ConsistencyMode::Kind::kSsp) ReleasePulls();
}

StatusOr<Consistency::PushVerdict> Consistency::Push(const std::string& trainer, int64_t epoch,
                                                     int64_t step) {
  TESSERA_CHECK(!applying_);
  auto last = last_push_.find(trainer);
  bool seen_before = last != last_push_.end() && last->second.epoch == epoch;
  if (seen_before && step <= last->second.step && options_.mode.kind != ConsistencyMode::Kind::kSync) {
    return PushVerdict::kDuplicate;
  }
  if (seen_before && step == last->second.step) return PushVerdict::kDuplicate;

  auto it = members_.find(trainer);
  if (it == members_.end() || it->second.epoch != epoch) {
    return Status::FailedPrecondition("trainer " + trainer + " (epoch " + std::to_string(epoch) +
                                      ") has not joined this pserver");
  }
  switch (options_.mode.kind) {
    case ConsistencyMode::Kind::kSync: {
      TESSERA_ASSIGN_OR_RETURN(PushVerdict v, CheckSyncPush(trainer, it->second, step));
      if (v == PushVerdict::kLate) return v;
      pushed_[trainer] = epoch;
      if (!held_prev_.count(trainer)) {
        held_prev_[trainer] = last == last_push_.end() ? std::nullopt : std::optional<LastPush>(last->second);
      }
      last_push_[trainer] = LastPush{epoch, step};
      MaybeCompleteBarrier();
      return PushVerdict::kHold;
    }
    case ConsistencyMode::Kind::kAsync:
      last_push_[trainer] = LastPush{epoch, step};
      ++version_;
      return PushVerdict::kApply;
    case ConsistencyMode::Kind::kSsp: {
      if (step < it->second.start) return PushVerdict::kDuplicate;
      if (step > it->second.start) {
        return Status::OutOfRange("trainer " + trainer + " pushed " + StepMsg(step) +
                                  " but its clock is at " + StepMsg(it->second.start));
      }
      it->second.start = step + 1;
      last_push_[trainer] = LastPush{epoch, step};
      ++version_;
      ReleasePulls();
      return PushVerdict::kApply;
    }
  }
  return Status::Internal("unknown consistency mode");
}

StatusOr<Consistency::PushVerdict> Consistency::AsyncPiece(const std::string& trainer, int64_t epoch,
                                                           int64_t step, int piece, bool last) {
  if (options_.mode.kind != ConsistencyMode::Kind::kAsync) {
    return Status::FailedPrecondition("a push in pieces outside sync mode is taken in async mode only");
  }
  auto done = last_push_.find(trainer);
  if (done != last_push_.end() && done->second.epoch == epoch && step <= done->second.step) {
    return PushVerdict::kDuplicate;
  }
  auto it = members_.find(trainer);
  if (it == members_.end() || it->second.epoch != epoch) {
    return Status::FailedPrecondition("trainer " + trainer + " (epoch " + std::to_string(epoch) +
                                      ") has not joined this pserver");
  }
  // A push it began before it joined again (this pserver restarted mid-push), or gave up.
  if (step < it->second.start) return PushVerdict::kDuplicate;
  auto found = async_pieces_.find(trainer);
  const AsyncPieces* open =
      found != async_pieces_.end() && found->second.epoch == epoch ? &found->second : nullptr;
  if (open && step < open->step) return PushVerdict::kDuplicate;
  if (open && step != open->step) open = nullptr;  // a newer push: the older one is given up
  if (open && open->seen.count(piece)) return PushVerdict::kDuplicate;
  static const std::set<int> kNone;
  TESSERA_RETURN_IF_ERROR(
      StepPieces::CheckNumbering(trainer, piece, last, open ? open->seen : kNone, open ? open->last : -1));
  AsyncPieces& p = async_pieces_[trainer];
  if (!open) p = AsyncPieces{epoch, step, -1, {}};
  p.seen.insert(piece);
  if (last) p.last = piece;
  if (p.last >= 0 && static_cast<int>(p.seen.size()) == p.last + 1) {
    async_pieces_.erase(trainer);
    last_push_[trainer] = LastPush{epoch, step};
    ++version_;
  }
  return PushVerdict::kApply;
}

StatusOr<Consistency::PushVerdict> Consistency::CheckSyncPush(const std::string& trainer, const Member& m,
                                                              int64_t step) const {
  if (step < version_ && options_.backup_trainers > 0 && m.start <= step) return PushVerdict::kLate;
  if (step < version_) {
    return Status::Aborted(StepMsg(step) + " is closed; the pserver is at " + StepMsg(version_) +
                           "; resume at " + StepMsg(version_));
  }
  if (step > version_) {
    return Status::OutOfRange(StepMsg(step) + " is not open; the pserver is at " + StepMsg(version_));
  }
  if (m.start > step) {
    return Status::Aborted("trainer " + trainer + " takes part from " + StepMsg(m.start) + "; resume at " +
                           StepMsg(m.start));
  }
  return PushVerdict::kHold;
}

StatusOr<Consistency::PushVerdict> Consistency::CheckPiece(const std::string& trainer, int64_t epoch,
                                                           int64_t step) const {
  if (options_.mode.kind != ConsistencyMode::Kind::kSync) {
    return Status::FailedPrecondition("a push in pieces needs a sync job");
  }
  if (applying_) return Status::Internal("a piece arrived while a barrier is being applied");
  auto last = last_push_.find(trainer);
  if (last != last_push_.end() && last->second.epoch == epoch && step == last->second.step) {
    return PushVerdict::kDuplicate;
  }
  auto it = members_.find(trainer);
  if (it == members_.end() || it->second.epoch != epoch) {
    return Status::FailedPrecondition("trainer " + trainer + " (epoch " + std::to_string(epoch) +
                                      ") has not joined this pserver");
  }
  return CheckSyncPush(trainer, it->second, step);
}

std::vector<std::string> Consistency::StepContributors() const {
  std::vector<std::string> out;
  for (const auto& [id, m] : members_) {
    if (m.start <= version_ || pushed_.count(id)) out.push_back(id);
  }
  for (const auto& [id, e] : pushed_) {
    if (!members_.count(id)) out.push_back(id);
  }
  std::sort(out.begin(), out.end(), TrainerIdLess);
  return out;
}

bool Consistency::Answerable(int64_t need) const {
  switch (options_.mode.kind) {
    case ConsistencyMode::Kind::kSync:
      return need <= version_ && !applying_;
    case ConsistencyMode::Kind::kAsync:
      return true;
    case ConsistencyMode::Kind::kSsp:
      // Before `min_trainers` have joined, nobody starts (the group is still forming).
      if (!started_) return false;
      return members_.empty() || min_clock() >= need - options_.mode.staleness;
  }
  return true;
}

StatusOr<bool> Consistency::Pull(uint64_t ticket, const std::string& trainer, int64_t epoch, int64_t need) {
  (void)trainer;
  (void)epoch;
  TESSERA_CHECK(!applying_);
  if (options_.mode.kind == ConsistencyMode::Kind::kSync && need > version_ + 1) {
    return Status::OutOfRange("pull for version " + std::to_string(need) +
                              " is more than one step ahead of the pserver (at version " +
                              std::to_string(version_) + ")");
  }
  if (Answerable(need)) return true;
  waiting_[ticket] = need;
  return false;
}

int64_t Consistency::ResumeStep(const std::string& trainer) const {
  auto it = members_.find(trainer);
  int64_t start = it == members_.end() ? 0 : it->second.start;
  return options_.mode.kind == ConsistencyMode::Kind::kSync ? std::max(version_, start) : start;
}

void Consistency::CancelPull(uint64_t ticket) { waiting_.erase(ticket); }

void Consistency::ReleasePulls() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (Answerable(it->second)) {
      ready_.pulls.push_back(it->first);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

void Consistency::MaybeCompleteBarrier() {
  if (applying_) return;
  if (pushed_.empty()) {
    // Every member takes part only from a later step (they agreed on it with other pservers
    // that went on without them): close this step with nothing to apply, so the version
    // catches up with them instead of waiting for pushes that will never come.
    if (!started_ || members_.empty()) return;
    for (const auto& [id, m] : members_) {
      if (m.start <= version_) return;
    }
    applying_ = true;
    ready_.barrier = Barrier{version_, {}, ReleasedByBarrier()};
    return;
  }
  int64_t eligible = 0, waiting = 0;
  for (const auto& [id, m] : members_) {
    if (m.start > version_) continue;  // not eligible for this step
    ++eligible;
    auto p = pushed_.find(id);
    if (p == pushed_.end() || p->second != m.epoch) ++waiting;  // still waiting for it
  }
  // All but the backup trainers (at least one push of an eligible member when there are any).
  if (waiting > 0 && (waiting > options_.backup_trainers || eligible - waiting < 1)) return;
  // Before the first barrier the group forms: `min_trainers` members, all but the backup
  // trainers of them pushed.
  if (!started_ && (static_cast<int>(pushed_.size()) < options_.min_trainers - options_.backup_trainers ||
                    (options_.backup_trainers > 0 && EligibleCount() < options_.min_trainers)))
    return;
  Barrier b;
  b.step = version_;
  for (const auto& [id, e] : pushed_) b.contributors.push_back(id);
  std::sort(b.contributors.begin(), b.contributors.end(), TrainerIdLess);
  b.releases = ReleasedByBarrier();
  applying_ = true;
  ready_.barrier = std::move(b);
}

std::vector<uint64_t> Consistency::ReleasedByBarrier() const {
  std::vector<uint64_t> out;
  for (const auto& [ticket, need] : waiting_)
    if (need <= version_ + 1) out.push_back(ticket);
  return out;
}

void Consistency::BarrierApplied(int64_t step) {
  TESSERA_CHECK(applying_ && step == version_);
  applying_ = false;
  started_ = true;
  pushed_.clear();
  held_prev_.clear();
  pieces_begun_ = false;
  ++version_;
  ReleasePulls();
  MaybeCompleteBarrier();
}

Consistency::State Consistency::Export() const {
  State s;
  s.version = version_;
  s.started = started_;
  s.clock_floor = clock_floor_;
  std::map<std::string, TrainerRecord> by_id;
  for (const auto& [id, m] : members_) {
    TrainerRecord& t = by_id[id];
    t.trainer = id;
    t.member = true;
    t.epoch = m.epoch;
    t.start = m.start;
  }
  for (const auto& [id, lp] : last_push_) {
    std::optional<LastPush> counted = lp;
    if (auto h = held_prev_.find(id); h != held_prev_.end()) counted = h->second;
    if (!counted) continue;
    TrainerRecord& t = by_id[id];
    t.trainer = id;
    t.last_epoch = counted->epoch;
    t.last_step = counted->step;
  }
  for (auto& [id, t] : by_id) s.trainers.push_back(std::move(t));
  return s;
}

Consistency::Consistency(Options options, const State& state)
    : options_(options), version_(state.version), started_(state.started), clock_floor_(state.clock_floor) {
  for (const auto& t : state.trainers) {
    if (t.member) members_[t.trainer] = Member{t.epoch, t.start};
    if (t.last_step >= 0) last_push_[t.trainer] = LastPush{t.last_epoch, t.last_step};
  }
}

Consistency::Ready Consistency::TakeReady() {
  Ready r = std::move(ready_);
  ready_ = Ready{};
  return r;
}

}  // namespace tessera
