// SimPserver: a pserver's coordination without its data plane, as scale_sim runs many in one
// process: its own etcd connection and lease, the claim of an index (waiting while it is taken,
// as a restarted pserver waits out its predecessor's lease), its ready key, and the watches a real
// pserver keeps (every trainer's registration, its own). Nothing is served: the address it
// registers answers nothing. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "coord/etcd_client.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "tessera/status.h"

namespace tessera::bench {

struct SimPserverOptions {
  std::string etcd;  // host:port, or several joined by commas
  std::string job;
  int pservers = 1;
  int index = -1;  // -1: the lowest free
  int lease_ttl_seconds = 10;
  std::chrono::milliseconds claim_for{std::chrono::seconds(60)};  // waiting for a taken index, at most
};

class SimPserver {
 public:
  static StatusOr<std::unique_ptr<SimPserver>> Start(const SimPserverOptions& options);
  ~SimPserver();  // a clean exit: the lease is revoked (unless it crashed)

  int index() const { return claim_.index; }
  int64_t epoch() const { return claim_.epoch; }
  // How many trainer registration changes its watch has seen (each one a list handed over).
  int64_t trainer_lists_seen() const { return trainer_lists_.load(); }
  // As kill -9: the lease is no longer kept alive (its keys go after the TTL), the watches end.
  void Crash();

 private:
  SimPserver() = default;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::unique_ptr<LeaseKeeper> keeper_;
  Claim claim_;
  std::unique_ptr<MemberWatch> trainer_watch_, self_watch_;
  std::mutex mu_;
  MemberEpochs trainers_;  // as the real pserver follows them
  std::atomic<int64_t> trainer_lists_{0};
  bool crashed_ = false;
};

}  // namespace tessera::bench
