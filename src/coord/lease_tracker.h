// LeaseTracker: decides, from keep-alive events and the time, whether a lease is alive.
// Pure: no I/O, no clock, no threads; the LeaseKeeper feeds it events and times.
//
// The rule: a lease is known alive until `sent + ttl`, where `sent` is when the newest
// acknowledged keep-alive (or the grant) was *sent*: etcd restarted its countdown no earlier
// than that, so this bound is safe. Past it, without news, the lease is "unconfirmed": etcd may
// already have expired it and given our keys to someone else, so an owner must stop acting on
// it; but it is not "lost" until etcd says so (a keep-alive answered with TTL <= 0), because
// etcd extends every lease when it restarts or elects a new leader, and a transient outage must
// not be mistaken for a loss. Lost is final.
// Not thread-safe (the LeaseKeeper serializes access).
#pragma once

#include <chrono>

#include "common/clock.h"

namespace tessera {

enum class LeaseState { kAlive, kUnconfirmed, kLost };
const char* LeaseStateName(LeaseState s);

class LeaseTracker {
 public:
  LeaseTracker(TimePoint granted_sent_at, std::chrono::milliseconds ttl) : expiry_(granted_sent_at + ttl) {}

  // A keep-alive sent at `sent_at` was answered with `ttl` (<= 0 means the lease is gone).
  void OnKeepAliveAnswered(TimePoint sent_at, std::chrono::milliseconds ttl) {
    if (ttl.count() <= 0) {
      lost_ = true;
      return;
    }
    if (sent_at + ttl > expiry_) expiry_ = sent_at + ttl;
  }
  // etcd said the lease does not exist (or it was revoked).
  void OnLost() { lost_ = true; }

  LeaseState StateAt(TimePoint now) const {
    if (lost_) return LeaseState::kLost;
    return now < expiry_ ? LeaseState::kAlive : LeaseState::kUnconfirmed;
  }
  // Until when the lease is known to be alive.
  TimePoint expiry() const { return expiry_; }
  // When a keeper that plans to act at `planned` should wake, having judged the lease at `now`:
  // at the expiry if it comes first (the lease turns unconfirmed then, to be reported on time),
  // else at `planned`. An expiry already judged (at or before `now`) no longer wakes it: waking
  // for a time that has passed returns at once, round after round.
  TimePoint WakeAt(TimePoint planned, TimePoint now) const {
    return expiry_ > now && expiry_ < planned ? expiry_ : planned;
  }

 private:
  TimePoint expiry_;
  bool lost_ = false;
};

}  // namespace tessera
