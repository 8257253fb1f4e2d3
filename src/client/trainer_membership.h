// TrainerMembership: a trainer's place in its job, apart from the steps it sends. It keeps the
// trainer's lease, registers it (a fixed id, waiting out a dead predecessor whose lease is running
// out, or the lowest free index), keeps what `tessera status` reads of it up to date (host, pid,
// the transport to each pserver), counts the trainers registered, and says goodbye (the key goes
// with a record that it left; the lease is revoked). The decisions (whether to wait for a
// predecessor) are client_rules.h's. Thread-safe: lost() may be read from any thread (the lease
// keeper's sets it); the rest is called from the trainer's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "client/client_rules.h"
#include "coord/etcd_client.h"
#include "coord/lease_keeper.h"
#include "tessera/status.h"

namespace tessera {

class TrainerMembership {
 public:
  struct Options {
    std::string job;
    std::string trainer_id;  // empty: the lowest free index
    std::string transport;   // the transport asked for, recorded for `tessera status`
    int lease_ttl_seconds = 10;
    std::chrono::milliseconds wait_for_predecessor{30000};  // a fixed id's predecessor, at most
  };
  // Takes a lease and registers the trainer under it; if the lease is gone before the
  // registration (a join longer than the TTL), takes a new one, up to 3 leases in all.
  static StatusOr<std::unique_ptr<TrainerMembership>> Join(etcd::EtcdClient* etcd, Options options,
                                                           const ClientLimits& limits);
  ~TrainerMembership();

  const std::string& id() const { return id_; }
  int64_t epoch() const { return epoch_; }
  int64_t lease() const { return keeper_->id(); }
  // The lease was lost: the registration went with it, and the job counts the trainer as gone.
  bool lost() const { return lost_.load(); }
  Status LostStatus() const;
  // Records the transport used to each pserver ({"0": "shm", ...}) in the registration. Best
  // effort: a failure is logged.
  void RecordTransports(const nlohmann::json& used);
  // Waits until at least `n` trainers are registered.
  Status WaitForTrainers(int n, std::chrono::milliseconds timeout) const;
  // Deregisters (recording that it left) and revokes the lease. Idempotent.
  void Leave();

 private:
  TrainerMembership(etcd::EtcdClient* etcd, Options options, const ClientLimits& limits);
  // A new lease (the one before, if any, is let go).
  Status StartLease();
  Status Register();
  Status RegisterFixedId(const std::string& info);

  etcd::EtcdClient* const etcd_;
  const Options options_;
  const ClientLimits limits_;
  std::atomic<bool> lost_{false};
  std::atomic<bool> registered_{false};  // Join succeeded: a lost lease from then on is the trainer's end
  std::unique_ptr<LeaseKeeper> keeper_;
  nlohmann::json info_;  // the registration's value
  std::string id_;
  int64_t epoch_ = 0;
  bool left_ = false;
};

}  // namespace tessera
