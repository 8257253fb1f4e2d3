// RestartPolicy: what `tessera local` (and a launched `tessera node`) does when one of its processes exits,
// as Kubernetes would: restart it after a backoff that doubles with each quick failure (reset once it stayed
// up a while), leave it be when its work is done, or give up on a crash loop. Pure: times are passed in; no
// processes or clocks inside. Not thread-safe (one supervisor).
#pragma once

#include <chrono>
#include <string>

#include "supervise/role.h"

namespace tessera::supervise {

struct RestartOptions {
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{10000};
  std::chrono::milliseconds stable_after{30000};  // up this long: the next failure starts over
  int max_quick_failures = 8;                     // in a row, each within stable_after: give up
  // The same exit code this many times in a row, each within stable_after, is a mistake that a
  // restart will not mend (a script with a syntax error, a wrong path, a bad setting): give up
  // at once. Exits by a signal and lost leases (code 3) do not count: they come from outside.
  int max_same_code = 3;
};

struct Decision {
  enum class Kind { kRestart, kDone, kGiveUp };
  Kind kind = Kind::kRestart;
  std::chrono::milliseconds delay{0};  // kRestart: wait this long first
  std::string reason;                  // for the log
};

class RestartPolicy {
 public:
  explicit RestartPolicy(RestartOptions o = {}) : o_(o) {}
  // A process of `role` that ran for `uptime` exited with `code` (128+signal if killed).
  // `stopping`: the supervisor asked it to stop (it is not restarted).
  Decision OnExit(Role role, int code, std::chrono::milliseconds uptime, bool stopping);
  int quick_failures() const { return quick_failures_; }

 private:
  RestartOptions o_;
  int quick_failures_ = 0;
  int same_code_ = 0;  // quick exits in a row with last_code_
  int last_code_ = -1;
};

}  // namespace tessera::supervise
