// Consistency: one pserver's rule for when pushed gradients apply and when pulls may answer.
// A pure state machine driven by events (a trainer joined or left, a push or a pull arrived);
// no sockets, threads or clocks inside. After each event the shell calls TakeReady() and acts on
// what it says: apply a sync barrier (then call BarrierApplied()), answer released pulls.
//
// Modes (see tessera/params.h):
//  - sync: step v is open. Each trainer whose start step is <= v ("eligible") pushes once for v;
//    pushes are held. When every eligible member has pushed, a Barrier names the contributors in
//    trainer-id order (numeric ids numerically), the shell sums their gradients in that order,
//    divides by the total sample count, applies once, and calls BarrierApplied(): the version
//    becomes v+1 and pulls needing v+1 are released. A trainer that leaves mid-step stops being
//    waited for (a push it already made still counts). A joining trainer takes part from the
//    current step if nobody has pushed for it yet, otherwise from the next one; before the first
//    barrier, the step waits until `min_trainers` have pushed, and joiners enter the current step
//    (a Consistency created past version 0, or restored from a checkpoint of version 0, is
//    restored mid-job and does not wait). When every
//    member starts only at a later step, the open step closes with an empty Barrier.
//    With backup trainers b (Options), a step closes once all but b eligible members pushed; a
//    push for a step that closed without it is kLate (dropped; the trainer resumes at the open
//    step), so a slow trainer costs a step nothing (TensorFlow's SyncReplicas "backup workers").
//  - async: every push applies on arrival (kApply); pulls answer at once.
//  - ssp:S: each member has a clock (the step it pushes next); a push applies on arrival and
//    advances its clock; a pull at clock c waits until the slowest member's clock is >= c - S.
//    Pulls wait until `min_trainers` members have joined once (the group forms first).
// Retried pushes are recognized by (trainer, epoch, step) and answered kDuplicate.
//
// Not thread-safe: the pserver serializes events under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessera/params.h"
#include "tessera/status.h"

namespace tessera {

// Orders trainer ids: numerically when both are numbers, otherwise as strings.
bool TrainerIdLess(const std::string& a, const std::string& b);

class Consistency {
 public:
  struct Options {
    ConsistencyMode mode;
    int min_trainers = 1;
    // sync: backup trainers b. A step closes once all but b of its eligible members pushed (at
    // least one); a push that comes after its step closed is late (kLate): dropped, and its
    // trainer goes on from the open step. 0: every member is waited for.
    int backup_trainers = 0;
  };

  struct Barrier {
    int64_t step = 0;
    std::vector<std::string> contributors;  // in trainer-id order
    // The waiting pulls BarrierApplied will release (they wait for the version this barrier
    // makes): the shell has the apply write their replies as it makes the values.
    std::vector<uint64_t> releases;
  };

  struct Ready {
    std::optional<Barrier> barrier;  // sync: apply it, then call BarrierApplied(step)
    std::vector<uint64_t> pulls;     // waiting pulls that may be answered now
    bool empty() const { return !barrier && pulls.empty(); }
  };

  enum class PushVerdict {
    kHold,       // sync: keep the gradient until the barrier
    kApply,      // async/ssp: apply it now
    kDuplicate,  // a retry of a push already taken: acknowledge, do nothing
    kLate,       // sync with backup trainers: its step closed without it; drop it, resume at ResumeStep()
  };

  // `mid_job`: restored into a job that ran already (from a checkpoint, or re-initialized by a
  // trainer), so it does not wait for `min_trainers` again; by default, any version past 0.
  explicit Consistency(Options options, int64_t version = 0);
  Consistency(Options options, int64_t version, bool mid_job);

  // The counted state between events, for a backup replica to take over with (--replicas):
  // members, the last counted push of each trainer, the version. Pushes held for the open sync
  // step are left out (they are not counted: their trainers send them again).
  struct TrainerRecord {
    std::string trainer;
    bool member = false;
    int64_t epoch = 0, start = 0;            // member
    int64_t last_epoch = 0, last_step = -1;  // last counted push; step -1: none
    bool operator==(const TrainerRecord&) const = default;
  };
  struct State {
    int64_t version = 0;
    bool started = false;
    int64_t clock_floor = 0;
    std::vector<TrainerRecord> trainers;  // by trainer id
    bool operator==(const State&) const = default;
  };
  State Export() const;
  // A rule continuing from `state` (as Export() left it), with no waiting pulls.
  Consistency(Options options, const State& state);

  // A trainer joins, asking to start no earlier than `requested`. Returns the step it takes part
  // from. Joining again with the same epoch may only raise the start step. FailedPrecondition for
  // an epoch older than the member's current one.
  StatusOr<int64_t> Join(const std::string& trainer, int64_t epoch, int64_t requested);

  // A trainer left (its lease expired, or it said goodbye). `epoch` 0 matches any epoch.
  void Leave(const std::string& trainer, int64_t epoch);

  // A push for `step`. Errors: FailedPrecondition (not joined, or a stale epoch), Aborted (the step
  // is closed, or the trainer takes part only from a later step: the message says where to
  // resume), OutOfRange (a step that is not open yet).
  StatusOr<PushVerdict> Push(const std::string& trainer, int64_t epoch, int64_t step);

  // ---- sync pushes in pieces (pserver/step_pieces.h) ----
  // What Push() would say of a piece of `trainer`'s push for `step`, without counting anything:
  // kHold for the open step, kDuplicate for a push already counted, kLate, or Push()'s errors.
  // FailedPrecondition outside sync mode.
  StatusOr<PushVerdict> CheckPiece(const std::string& trainer, int64_t epoch, int64_t step) const;
  // A piece of the open step arrived: from now on a trainer that joins takes part from the next
  // step, as when a push was counted (blocks may already be applied without it).
  void PieceArrived() { pieces_begun_ = true; }
  // Whether a dense block may be applied before the open step's barrier, once every trainer of
  // StepContributors() sent it: only after the group formed (the first barrier) and without
  // backup trainers (which decide who contributes only when the step closes).
  bool EarlyApplyAllowed() const {
    return options_.mode.kind == ConsistencyMode::Kind::kSync && started_ && options_.backup_trainers == 0 &&
           !applying_;
  }
  // sync: whose gradients the open step sums were every one to push: the eligible members and
  // the trainers whose push is counted, in trainer-id order.
  std::vector<std::string> StepContributors() const;

  // ---- async pushes in pieces (a large push's parts, each applied as it arrives) ----
  // Piece `piece` of `trainer`'s push for `step` (`last`: no pieces follow it). kApply, or
  // kDuplicate for a piece that already arrived or a push already counted (a retry). The push
  // counts (version, the last counted push) when its last missing piece arrives; a piece of a
  // newer step forgets an unfinished older push (its trainer gave it up), whose later pieces are
  // then dropped as duplicates, as are pieces of a step before the trainer's join step (it
  // joined again after this pserver restarted in the middle of that push). Errors as Push();
  // InvalidArgument for a numbering error (StepPieces::CheckNumbering); FailedPrecondition
  // outside async mode.
  StatusOr<PushVerdict> AsyncPiece(const std::string& trainer, int64_t epoch, int64_t step, int piece,
                                   bool last);

  // A pull needing version `need` (sync) or made at clock `need` (ssp). Returns true if it may be
  // answered now; false if it waits (a later Ready lists `ticket`). OutOfRange for a sync pull
  // more than one version ahead.
  StatusOr<bool> Pull(uint64_t ticket, const std::string& trainer, int64_t epoch, int64_t need);
  void CancelPull(uint64_t ticket);

  // Where a trainer should continue after a push was refused: the open step, or its start step
  // if that is later.
  int64_t ResumeStep(const std::string& trainer) const;

  // sync: the shell applied the barrier for `step`. REQUIRES: it was the last Ready's barrier.
  void BarrierApplied(int64_t step);

  // What the shell must do now; clears it.
  Ready TakeReady();

  // sync: the open step (= number of applied barriers since version 0). async/ssp: the number of
  // pushes applied.
  int64_t version() const { return version_; }
  // ssp: the slowest member's clock (the last known one when there are no members). Others: version.
  int64_t min_clock() const;
  std::vector<std::string> members() const;
  bool applying() const { return applying_; }
  // Waiting pulls (for tests and status).
  size_t waiting_pulls() const { return waiting_.size(); }

 private:
  struct Member {
    int64_t epoch = 0;
    int64_t start = 0;  // sync: first step it takes part in; ssp: its clock
  };
  struct LastPush {
    int64_t epoch = 0;
    int64_t step = -1;
  };

  void MaybeCompleteBarrier();
  // The waiting pulls a barrier at this version releases once applied (Barrier::releases).
  std::vector<uint64_t> ReleasedByBarrier() const;
  // Push()'s sync rule for a member `m` (no change).
  StatusOr<PushVerdict> CheckSyncPush(const std::string& trainer, const Member& m, int64_t step) const;
  void ReleasePulls();
  bool Answerable(int64_t need) const;
  int64_t EligibleCount() const;
  static std::string StepMsg(int64_t v);

  Options options_;
  int64_t version_;
  std::map<std::string, Member> members_;
  std::map<std::string, int64_t> pushed_;  // sync: trainer -> epoch, pushes held for the open step
  std::map<std::string, LastPush> last_push_;
  struct AsyncPieces {
    int64_t epoch = 0, step = 0;
    int last = -1;  // the last piece's index, once it arrived
    std::set<int> seen;
  };
  std::map<std::string, AsyncPieces> async_pieces_;  // async: pushes whose pieces are arriving
  // sync: for trainers whose push is held for the open step, their last counted push before it
  // (none: they had none), so Export() leaves uncounted pushes out.
  std::map<std::string, std::optional<LastPush>> held_prev_;
  bool started_ = false;                 // sync: a barrier has completed
  bool pieces_begun_ = false;            // sync: a piece of the open step arrived
  bool applying_ = false;                // sync: a barrier is out for the shell to apply
  int64_t clock_floor_ = 0;              // ssp: min clock when the last member left
  std::map<uint64_t, int64_t> waiting_;  // ticket -> need
  Ready ready_;
};

}  // namespace tessera
