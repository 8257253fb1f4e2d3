// ReplicaTracker: the console's view of a replicated or elastic job's shards. Polled by the
// master (Poll reads the replica map and the pserver-host registrations from etcd); View gives
// each host and shard with its state (job/replica_view.h) and the recent failovers, handovers
// and copies. Thread-safety: Poll and View may be called from any thread.
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "coord/etcd_client.h"
#include "job/replica_view.h"

namespace tessera::master {

class ReplicaTracker {
 public:
  // `elastic`: the job's primaries are balanced over its hosts (JobConfig::initial_pservers > 0).
  explicit ReplicaTracker(bool elastic) : elastic_(elastic) {}

  // Reads the job's map and hosts; an unreadable etcd changes nothing.
  void Poll(etcd::EtcdClient* etcd, const std::string& job, int64_t now_ms);
  // {"map_epoch", "replicas", "hosts": [{host, leaving, info, primaries, backups}], "shards":
  // [{shard, primary, backups, state, moving_to}], "changes": [{at_ms, shard, kind, from, to,
  // epoch}] (newest last), "failovers", "handovers"}; null before the first map.
  nlohmann::json View() const;

 private:
  const bool elastic_;
  mutable std::mutex mu_;
  std::optional<ReplicaMap> map_;
  PserverHosts hosts_;
  ReplicaHistory history_;
};

}  // namespace tessera::master
