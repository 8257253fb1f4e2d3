// The trainer client's decisions, as pure classes: who initializes the pservers, which step a
// trainer joins at, whether to wait for a predecessor's registration, when dropped gradients
// mean the model has diverged, and which of a pserver link's lanes may start a call. No sockets, threads,
// clocks or etcd inside: the client (client.cc) feeds them what it saw and does what they say. The limits
// they use are named in ClientLimits. Not thread-safe (each lives on one client thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "job/job_config.h"
#include "tessera/status.h"

namespace tessera {

// Every limit of the client's protocols, with its default.
struct ClientLimits {
  // Initialize(): start over this many times when a pserver is replaced while it runs.
  int init_rounds = 5;
  // The join: ask every pserver for a start step at most this many times before giving up.
  int join_rounds = 10;
  // A fixed trainer id held by a predecessor: how often to look again.
  std::chrono::milliseconds predecessor_poll{250};
  // A predecessor whose lease has more than 2 x TTL + this left is alive, not dying: refuse.
  int64_t predecessor_slack_seconds = 5;
  // A pserver replaced mid-job: live trainers hold current values and restore it; a newcomer
  // waits this many lease TTLs (+ predecessor_slack_seconds) before restoring it itself.
  int restore_grace_ttls = 3;
  // Gradients with NaN or infinity dropped this many steps in a row: the model has diverged.
  int max_nonfinite_in_a_row = 10;

  // The longest remaining lease of a predecessor worth waiting for.
  int64_t MaxPredecessorTtl(int64_t lease_ttl_seconds) const {
    return 2 * lease_ttl_seconds + predecessor_slack_seconds;
  }
  std::chrono::seconds RestoreGrace(int64_t lease_ttl_seconds) const {
    return std::chrono::seconds(restore_grace_ttls * lease_ttl_seconds + predecessor_slack_seconds);
  }
};

// Who makes the pservers ready, from what the directory shows.
enum class InitPlan {
  kNothing,         // every pserver is ready
  kAwaitRestorers,  // some are ready: live trainers restore the rest; wait, then take the lock
  kTakeLock,        // none is ready: a fresh job (or all replaced): one trainer, under the lock
};
InitPlan PlanInit(bool all_ready, bool any_ready);

// Under the init lock: what this trainer does itself.
enum class InitWork {
  kNothing,            // whoever held the lock before made every pserver ready
  kRestoreFromOthers,  // some are ready: start the others at their version with current values
  kFreshInit,          // none is ready: this trainer's initial values at its step
};
InitWork PlanInitUnderLock(bool all_ready, bool any_ready);

// The join: every pserver must name the same start step. Each round the client asks every
// pserver with requested(); the answers say the step each would start this trainer at.
class StartStepAgreement {
 public:
  enum class Outcome { kAgreed, kAskAgain, kGiveUp };
  StartStepAgreement(int64_t requested, int max_rounds);

  int64_t requested() const { return requested_; }
  // REQUIRES: one answer per pserver, at least one.
  Outcome Answer(const std::vector<int64_t>& starts);
  // After kAgreed: the step every pserver named.
  int64_t agreed() const { return agreed_; }
  Status GiveUpStatus() const;

 private:
  int64_t requested_;
  int max_rounds_;
  int rounds_ = 0;
  int64_t agreed_ = -1;
};

// A fixed trainer id was refused. Only a refusal for the key being taken (AlreadyExists, or
// Aborted by a racing transaction) can be a dead predecessor's registration still there.
bool MayBeAPredecessor(StatusCode refusal);
// Whether a registration that failed with `refusal` failed because the trainer's lease was gone
// before it registered (its keeper saw it lost, or etcd said the lease is not found), as a join
// that takes longer than the TTL on an overloaded etcd can: the join takes a new lease and
// registers again.
bool LeaseGoneBeforeRegistering(const Status& refusal, bool keeper_lost);
enum class PredecessorVerdict {
  kRefuse,    // a live holder (or our deadline passed): return the refusal
  kWait,      // a dying predecessor: look again after predecessor_poll
  kRetryNow,  // the key is gone already: register again
};
// `key_present` and `remaining_ttl_seconds` describe the holder's key and lease; `expired`: our
// deadline has passed.
PredecessorVerdict JudgePredecessor(bool key_present, int64_t remaining_ttl_seconds, bool expired,
                                    int64_t lease_ttl_seconds, const ClientLimits& limits);

// Dropped gradients (NaN or infinity) under the job's policy: what a push that dropped one says.
class NonFiniteStreak {
 public:
  NonFiniteStreak(NonFinitePolicy policy, int max_in_a_row) : policy_(policy), max_in_a_row_(max_in_a_row) {}
  // A step whose gradient was finite.
  void Clean() { in_a_row_ = 0; }
  // A step whose gradient was dropped for `why`: OK (the step went on without it), or the
  // error the push reports (policy error, or too many in a row).
  Status Dropped(const std::string& why);
  int in_a_row() const { return in_a_row_; }

 private:
  NonFinitePolicy policy_;
  int max_in_a_row_;
  int in_a_row_ = 0;
};

// Who scans a step's gradient for NaN and infinity: the trainer, before sending anything, unless
// the job allows them (`allow_nonfinite`: nobody) or the push is waited for at once in a job with
// one pserver that is not async: then that pserver scans it (it refuses or takes a push whole, so
// nothing of a non-finite gradient is applied anywhere) and its finding comes back with the reply
// as the trainer's dropped gradient. A scan costs 20-60 us per 0.8 MB (bench/README.md).
enum class NonFiniteScan { kNone, kTrainer, kPserver };
NonFiniteScan WhoScans(const JobConfig& job, bool allow_nonfinite, bool waited);

// A pserver link's two lanes (PserverLink): what each runs now. Lane 0 is the main lane, lane 1
// the second, which only runs a call beside a main-lane call of the same overlap group.
struct LaneState {
  bool running[2] = {false, false};
  uint64_t group[2] = {0, 0};  // the running call's overlap group (0: none)
};
// Whether the next queued call, of overlap group `next_group` (0: none), may start on `lane`:
// the lane is idle, and the other is idle (main lane only) or runs a call of the same non-zero
// group. So two calls run together only when they share a group, and nothing else ever does.
bool MayStartOnLane(int lane, uint64_t next_group, const LaneState& s);

}  // namespace tessera
