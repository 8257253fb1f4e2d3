// RestartPolicy (see restart_policy.h).
#include "supervise/restart_policy.h"

#include <algorithm>

namespace tessera::supervise {

Decision RestartPolicy::OnExit(Role role, int code, std::chrono::milliseconds uptime, bool stopping) {
  Decision d;
  if (stopping) {
    d.kind = Decision::Kind::kDone;
    d.reason = "stopped as asked";
    return d;
  }
  // A trainer that finishes its work exits 0: it is done, like a completed Kubernetes Job pod.
  if (role == Role::kTrainer && code == 0) {
    d.kind = Decision::Kind::kDone;
    d.reason = "finished";
    return d;
  }
  if (uptime >= o_.stable_after) quick_failures_ = same_code_ = 0;
  ++quick_failures_;
  const bool from_outside = code >= 128 || code == 3;
  same_code_ = !from_outside && code == last_code_ ? same_code_ + 1 : (from_outside ? 0 : 1);
  last_code_ = code;
  if (same_code_ >= o_.max_same_code) {
    d.kind = Decision::Kind::kGiveUp;
    d.reason = "exited with code " + std::to_string(code) + " " + std::to_string(same_code_) +
               " times in a row, each soon after starting: giving up (a restart will not mend it)";
    return d;
  }
  if (quick_failures_ > o_.max_quick_failures) {
    d.kind = Decision::Kind::kGiveUp;
    d.reason = std::string(RoleName(role)) + " failed " + std::to_string(quick_failures_) +
               " times in a row, each soon after starting (exit " + std::to_string(code) + "): giving up";
    return d;
  }
  auto delay = o_.initial_backoff;
  for (int i = 1; i < quick_failures_ && delay < o_.max_backoff; ++i) delay *= 2;
  d.delay = std::min(delay, o_.max_backoff);
  d.reason = code > 128 ? "killed by signal " + std::to_string(code - 128)
                        : "exited with code " + std::to_string(code);
  if (code == 3) d.reason = "lost its lease";
  return d;
}

}  // namespace tessera::supervise
