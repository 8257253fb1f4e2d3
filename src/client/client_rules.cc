// The trainer client's pure decisions (see client_rules.h).
#include "client/client_rules.h"

#include <algorithm>

namespace tessera {

InitPlan PlanInit(bool all_ready, bool any_ready) {
  if (all_ready) return InitPlan::kNothing;
  return any_ready ? InitPlan::kAwaitRestorers : InitPlan::kTakeLock;
}

InitWork PlanInitUnderLock(bool all_ready, bool any_ready) {
  // The lock may come after whoever held it made every pserver ready: nothing to do then (and
  // the restore path must not run: its pull could wait for this very trainer to join).
  if (all_ready) return InitWork::kNothing;
  return any_ready ? InitWork::kRestoreFromOthers : InitWork::kFreshInit;
}

StartStepAgreement::StartStepAgreement(int64_t requested, int max_rounds)
    : requested_(requested), max_rounds_(max_rounds) {}

StartStepAgreement::Outcome StartStepAgreement::Answer(const std::vector<int64_t>& starts) {
  ++rounds_;
  const int64_t top = *std::max_element(starts.begin(), starts.end());
  if (std::all_of(starts.begin(), starts.end(), [&](int64_t s) { return s == top; })) {
    agreed_ = top;
    return Outcome::kAgreed;
  }
  // Ask everyone for the latest step any of them named: the others move up to it.
  requested_ = top;
  return rounds_ >= max_rounds_ ? Outcome::kGiveUp : Outcome::kAskAgain;
}

Status StartStepAgreement::GiveUpStatus() const {
  return Status::Aborted("pservers did not agree on a start step in " + std::to_string(max_rounds_) +
                         " rounds");
}

NonFiniteScan WhoScans(const JobConfig& job, bool allow_nonfinite, bool waited) {
  if (allow_nonfinite) return NonFiniteScan::kNone;
  const bool pserver = waited && job.pservers == 1 && job.mode.kind != ConsistencyMode::Kind::kAsync;
  return pserver ? NonFiniteScan::kPserver : NonFiniteScan::kTrainer;
}

bool MayBeAPredecessor(StatusCode refusal) {
  return refusal == StatusCode::kAlreadyExists || refusal == StatusCode::kAborted;
}

bool LeaseGoneBeforeRegistering(const Status& refusal, bool keeper_lost) {
  if (refusal.ok()) return false;
  return keeper_lost || (refusal.code() == StatusCode::kNotFound &&
                         refusal.message().find("lease not found") != std::string::npos);
}

PredecessorVerdict JudgePredecessor(bool key_present, int64_t remaining_ttl_seconds, bool expired,
                                    int64_t lease_ttl_seconds, const ClientLimits& limits) {
  if (expired) return PredecessorVerdict::kRefuse;
  if (!key_present) return PredecessorVerdict::kRetryNow;
  // Only a short remaining lease belongs to a dead predecessor worth waiting for; a live
  // trainer with the same id keeps renewing a full one.
  if (remaining_ttl_seconds > limits.MaxPredecessorTtl(lease_ttl_seconds)) return PredecessorVerdict::kRefuse;
  return PredecessorVerdict::kWait;
}

Status NonFiniteStreak::Dropped(const std::string& why) {
  ++in_a_row_;
  if (policy_ == NonFinitePolicy::kError) {
    return Status::InvalidArgument(why +
                                   "; the step went on without this trainer's gradient (the job's non-finite "
                                   "policy is error)");
  }
  if (in_a_row_ >= max_in_a_row_) {
    return Status::InvalidArgument(
        std::to_string(in_a_row_) + " steps in a row had gradients with NaN or infinity (the last: " + why +
        "): the model has probably diverged; lower the learning rate or check the data");
  }
  return Status::OK();
}

bool MayStartOnLane(int lane, uint64_t next_group, const LaneState& s) {
  if (lane < 0 || lane > 1 || s.running[lane]) return false;
  const int other = 1 - lane;
  const bool beside = next_group != 0 && s.running[other] && s.group[other] == next_group;
  // The second lane only takes a call beside the main lane's (alone, the main lane takes it).
  if (lane == 1) return beside;
  return !s.running[other] || beside;
}

}  // namespace tessera
