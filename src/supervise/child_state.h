// ChildState: the life of one process `tessera local` supervises, as a pure state machine: one
// phase, changed only by the events below, each of which says what the supervisor must do now.
// No processes, clocks or I/O inside: times are passed in.
//
//   kRunning --exit--> kBackoff (restart later) | kDone (finished, or stopped as asked) | kFailed
//   kRunning --Stop--> kStopping --exit--> kDone
//   kBackoff --Tick past the restart time--> (kSpawn) --Spawned--> kRunning
//   kBackoff --Stop--> kDone
//
// A frozen child (SIGSTOP, a hung disk) lives on but stops renewing its etcd lease, so its
// registration disappears. The supervisor reports what it sees (Registered / NotRegistered); a
// running child that was registered and has not been for `lease_grace` is killed (kKill) and its
// exit counts as a lost lease: a replacement starts at once (the freeze already cost a lease TTL). A trainer
// that deregisters on purpose (it finished) is not reported as NotRegistered.
//
// Crash loops end early (RestartPolicy): the same exit code three times in a row, each soon after
// starting, gives up with kFailed; the supervisor then shows the end of the child's log.
// Not thread-safe (one supervisor thread).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/clock.h"
#include "supervise/restart_policy.h"

namespace tessera::supervise {

enum class ChildPhase {
  kRunning,   // started; has not exited
  kStopping,  // asked to stop (SIGTERM to its group): when it exits it is done
  kBackoff,   // exited; restarted at restart_at()
  kDone,      // finished its work, or stopped as asked: never restarted
  kFailed,    // crash loop: given up
};
const char* ChildPhaseName(ChildPhase p);

struct ChildAction {
  enum class Kind {
    kNone,
    kSpawn,      // start the process (again)
    kTerminate,  // SIGTERM to the group; SIGKILL after the stop grace period
    kKill,       // SIGKILL to the group now, without waiting for it
  };
  Kind kind = Kind::kNone;
  std::string event;  // a line for the person at the terminal ("" for none)
};

struct ChildOptions {
  RestartOptions restart;
  // A running child whose registration has been gone this long is treated as dead. (The lease
  // TTL has already passed without a renewal when the key goes; this only lets a child that
  // noticed the loss itself exit on its own first.)
  std::chrono::milliseconds lease_grace{500};
};

class ChildState {
 public:
  ChildState(std::string name, Role role, ChildOptions options = {});

  const std::string& name() const { return name_; }
  Role role() const { return role_; }
  ChildPhase phase() const { return phase_; }
  // kRunning or kStopping: a process exists.
  bool alive() const { return phase_ == ChildPhase::kRunning || phase_ == ChildPhase::kStopping; }
  // Counts toward the wanted number of its kind: running or about to restart, not asked to stop.
  bool active() const {
    return !stopped_ && (phase_ == ChildPhase::kRunning || phase_ == ChildPhase::kBackoff);
  }
  // Done with its work (not stopped by the supervisor).
  bool finished() const { return phase_ == ChildPhase::kDone && !stopped_; }
  bool stopped() const { return stopped_; }
  TimePoint restart_at() const { return restart_at_; }
  int restarts() const { return restarts_; }
  int starts() const { return spawns_; }
  // Why it failed (kFailed), for the error the supervisor returns.
  const std::string& failure() const { return failure_; }

  // The process was started (first time, a restart, or a restart after a rollback).
  void Spawned(TimePoint now);
  // The process exited with `code` (128+signal when killed).
  ChildAction Exited(int code, TimePoint now);
  // The supervisor wants it gone for good (scale-down, shutdown).
  ChildAction Stop();
  // Whether the child's registration (its pid under its role's etcd prefix) is there now.
  void Registered(TimePoint now);
  void NotRegistered(TimePoint now);
  // Time passed: a restart that is due, or a child whose lease is gone.
  ChildAction Tick(TimePoint now);

 private:
  std::string name_;
  Role role_;
  ChildOptions options_;
  RestartPolicy policy_;
  ChildPhase phase_ = ChildPhase::kBackoff;  // until Spawned
  bool stopped_ = false;                     // Stop() was asked
  TimePoint started_{};
  TimePoint restart_at_{};
  int restarts_ = 0;
  int spawns_ = 0;
  bool seen_registered_ = false;                 // this incarnation registered at least once
  std::optional<TimePoint> unregistered_since_;  // registered once, gone since then
  bool killed_for_lease_ = false;
  std::string failure_;
};

}  // namespace tessera::supervise
