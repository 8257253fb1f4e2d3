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

namespace tessera::local {

struct JobRegistrations {
  std::set<int64_t> registered;  // pids with a live registration
  std::set<int64_t> left;        // pids of trainers that deregistered on purpose
};

StatusOr<JobRegistrations> ReadRegistrations(etcd::EtcdClient* etcd, const std::string& job);

// The leading master's web console URL ("" while there is no leader, or it has no console).
std::string LeaderConsoleUrl(etcd::EtcdClient* etcd, const std::string& job);

}  // namespace tessera::local
