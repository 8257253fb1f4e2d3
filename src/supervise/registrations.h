// What etcd says about the processes of a job, by pid: which are registered right now (pservers,
// trainers, master candidates: each key is attached to its process's lease) and which trainers
// deregistered on purpose. The supervisor of `tessera local` compares this with the processes it
// runs to find one whose lease expired while it still lives (frozen). Thread-safe as the etcd
// client is.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera::supervise {

struct JobRegistrations {
  std::set<int64_t> registered;  // pids with a live registration
  std::set<int64_t> left;        // pids of trainers that deregistered on purpose
};

StatusOr<JobRegistrations> ReadRegistrations(etcd::EtcdClient* etcd, const std::string& job);

// Revokes the lease of every registration of `job` that process `pid` made (a pserver's index, a
// trainer's id, a master's candidacy), so what it held is free now rather than when its TTL
// runs out. For a process the caller saw die. Returns how many leases were revoked.
StatusOr<int> RevokeLeasesOf(etcd::EtcdClient* etcd, const std::string& job, int64_t pid);

// The leading master's web console URL ("" while there is no leader, or it has no console).
std::string LeaderConsoleUrl(etcd::EtcdClient* etcd, const std::string& job);

}  // namespace tessera::supervise
