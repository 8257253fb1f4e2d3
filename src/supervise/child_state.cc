// ChildState (see child_state.h).
#include "supervise/child_state.h"

#include <fmt/format.h>

#include <iterator>

namespace tessera::supervise {

const char* ChildPhaseName(ChildPhase p) {
  // In the order of the enum (child_state.h).
  static constexpr const char* kNames[] = {"running", "stopping", "waiting to restart", "done", "failed"};
  static_assert(std::size(kNames) == static_cast<size_t>(ChildPhase::kFailed) + 1, "a name per phase");
  const auto i = static_cast<size_t>(p);
  return i < std::size(kNames) ? kNames[i] : "?";
}

ChildState::ChildState(std::string name, Role role, ChildOptions options)
    : name_(std::move(name)), role_(role), options_(options), policy_(options.restart) {}

void ChildState::Spawned(TimePoint now) {
  if (spawns_++ > 0) ++restarts_;
  phase_ = ChildPhase::kRunning;
  started_ = now;
  seen_registered_ = false;
  unregistered_since_.reset();
  killed_for_lease_ = false;
}

ChildAction ChildState::Exited(int code, TimePoint now) {
  if (!alive()) return {};
  const bool stopping = phase_ == ChildPhase::kStopping;
  // Killed by us because its lease was gone: a lost lease, not a crash of its own.
  const int effective = killed_for_lease_ && !stopping ? 3 : code;
  auto uptime = std::chrono::duration_cast<std::chrono::milliseconds>(now - started_);
  Decision d = policy_.OnExit(role_, effective, uptime, stopping);
  if (killed_for_lease_ && !stopping) d.reason = "stopped answering (its lease expired while it still ran)";
  switch (d.kind) {
    case Decision::Kind::kDone:
      phase_ = ChildPhase::kDone;
      return {ChildAction::Kind::kNone, stopping ? "" : name_ + " " + d.reason};
    case Decision::Kind::kGiveUp:
      phase_ = ChildPhase::kFailed;
      failure_ = name_ + " " + d.reason;
      return {ChildAction::Kind::kNone, ""};
    case Decision::Kind::kRestart:
      phase_ = ChildPhase::kBackoff;
      if (killed_for_lease_ && !stopping) d.delay = std::chrono::milliseconds(0);
      restart_at_ = now + d.delay;
      return {ChildAction::Kind::kNone,
              fmt::format("{} {}; restarting it in {:.1f} s", name_, d.reason, d.delay.count() / 1000.0)};
  }
  return {};
}

ChildAction ChildState::Stop() {
  stopped_ = true;
  switch (phase_) {
    case ChildPhase::kRunning:
      phase_ = ChildPhase::kStopping;
      return {ChildAction::Kind::kTerminate, ""};
    case ChildPhase::kBackoff:
      phase_ = ChildPhase::kDone;
      return {};
    default:
      return {};
  }
}

void ChildState::Registered(TimePoint) {
  seen_registered_ = true;
  unregistered_since_.reset();
}

void ChildState::NotRegistered(TimePoint now) {
  if (seen_registered_ && !unregistered_since_) unregistered_since_ = now;
}

ChildAction ChildState::Tick(TimePoint now) {
  if (phase_ == ChildPhase::kBackoff && !stopped_ && spawns_ > 0 && now >= restart_at_) {
    return {ChildAction::Kind::kSpawn, ""};
  }
  if (phase_ == ChildPhase::kRunning && !killed_for_lease_ && unregistered_since_ &&
      now - *unregistered_since_ >= options_.lease_grace) {
    killed_for_lease_ = true;
    return {
        ChildAction::Kind::kKill,
        name_ + " lost its lease but its process still runs (frozen?): killing it to start a replacement"};
  }
  return {};
}

}  // namespace tessera::supervise
