// LeaseKeeper: grants an etcd lease and keeps it alive over one LeaseKeepAlive stream, and tells
// its owner at once when the lease is in doubt or lost, so a server can stop serving.
//
// States (see lease_tracker.h): kAlive -> kUnconfirmed (no renewal confirmed before the lease
// could have expired; owner must stop acting on it) -> back to kAlive if etcd, once reachable,
// renews it; or -> kLost (etcd says the lease is gone; final). The listener is called on the
// keeper's thread on every change, and must not block for long.
//
// Keep-alives go every `keepalive_interval` (default: TTL/3, at most 500 ms, so a revoked lease
// is noticed within about half a second). After the stream breaks it is reopened with backoff,
// on the next endpoint, and the first keep-alive goes at once. An etcd outage is logged once when
// it starts (no endpoint accepts the stream) and once when etcd answers again.
//
// Thread-safety: all methods may be called from any thread but the listener's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "coord/etcd_client.h"
#include "coord/lease_tracker.h"
#include "tessera/status.h"

namespace tessera {

struct LeaseKeeperOptions {
  int64_t ttl_seconds = 10;                         // lease time-to-live (etcd's minimum is about 2 s)
  std::chrono::milliseconds keepalive_interval{0};  // 0: min(TTL/3, 500 ms)
};

class LeaseKeeper {
 public:
  using Listener = std::function<void(LeaseState)>;

  // Grants a lease and starts keeping it alive.
  static StatusOr<std::unique_ptr<LeaseKeeper>> Start(etcd::EtcdClient* etcd, LeaseKeeperOptions options,
                                                      Listener listener = nullptr);
  ~LeaseKeeper();  // stops keeping the lease alive (it then expires after its TTL)
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  int64_t id() const { return id_; }
  int64_t ttl_seconds() const { return ttl_seconds_; }
  LeaseState state() const;
  bool alive() const { return state() == LeaseState::kAlive; }

  // How many keep-alives etcd has answered so far.
  int64_t renewals() const { return renewals_.load(); }

  // Blocks until the state is not kAlive or `timeout` passes; returns the state.
  LeaseState WaitWhileAlive(std::chrono::milliseconds timeout);

  // Stops keeping the lease alive and revokes it, so its keys disappear now.
  Status Revoke();
  // Stops keeping the lease alive; its keys expire after the TTL.
  void Stop();

 private:
  LeaseKeeper(etcd::EtcdClient* etcd, int64_t id, int64_t ttl, TimePoint granted_sent_at,
              std::chrono::milliseconds interval, Listener listener);
  void Run();
  struct Stream;
  // Sends a keep-alive every interval on `stream` until it breaks, a write fails, the keeper
  // stops or the lease is lost.
  void SendKeepAlives(Stream& stream);
  // Judges the lease now, then waits under mu_ until `planned`, the lease's expiry if that is
  // still ahead and comes first, or `wake()`; returns with mu_ held.
  std::unique_lock<std::mutex> JudgeThenWait(TimePoint planned, const std::function<bool()>& wake);
  // Re-evaluates the state at `now`; notifies the listener on change. REQUIRES: mu_ not held.
  void Evaluate(TimePoint now);
  // An outage began (logged once) / etcd answered again (logged if there was one).
  void NoteUnreachable(const std::string& endpoint, const std::string& why);
  void NoteReachable();

  etcd::EtcdClient* etcd_;
  const int64_t id_;
  const int64_t ttl_seconds_;
  const std::chrono::milliseconds interval_;
  Listener listener_;

  mutable std::mutex mu_;  // guards tracker_, reported_, and is the lock for cv_
  LeaseTracker tracker_;
  LeaseState reported_ = LeaseState::kAlive;
  std::optional<TimePoint> unreachable_since_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> renewals_{0};

  std::shared_ptr<Stream> stream_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tessera
