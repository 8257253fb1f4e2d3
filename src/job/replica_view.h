// What people see of a replicated or elastic job (the console, `tessera status`): each shard's
// holders and what is happening to it, and the changes between successive replica maps
// (failovers, handovers, copies made or lost). Pure: the maps and live hosts come from the
// caller, times are passed in.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "job/replica_map.h"

namespace tessera {

// The pserver hosts of a job from their registrations (name: the host index; value: its JSON,
// with "leaving": true while the host hands its shards over). Other names are skipped.
struct PserverHosts {
  std::set<int> live, leaving;
  std::map<int, std::string> values;  // host -> its registration's value
};
PserverHosts ParseHosts(const std::vector<std::pair<std::string, std::string>>& registrations);

struct ShardView {
  int shard = 0;
  int primary = 0;
  std::vector<int> backups;
  // "ok"; "failing over" (a holder's host is gone, the map not yet changed); "copying" (fewer
  // copies than wanted, a live host will get one); "under-replicated" (fewer copies than wanted
  // and no host to put one on); "moving" (its primary is being handed over to `moving_to`).
  std::string state = "ok";
  int moving_to = -1;
};

// The shards of map `m`, with `live` the registered hosts and `leaving` those of them draining.
// Primaries move to balance the hosts in an `elastic` job (JobConfig::initial_pservers > 0), and
// off leaving hosts in any job, as the hosts themselves decide (pserver_node_replicas.cc).
std::vector<ShardView> ViewShards(const ReplicaMap& m, const std::set<int>& live,
                                  const std::set<int>& leaving, bool elastic);

struct ShardChange {
  int shard = 0;
  // "failover" (a new primary; the old one's host was gone), "handover" (a new primary; the old
  // one's host still live: a move), "copy" (a new backup), "dropped" (a backup left the shard).
  std::string kind;
  int from = -1, to = -1;
  int64_t epoch = 0;  // of the map that made the change
  int64_t at_ms = 0;
  bool operator==(const ShardChange&) const = default;
};

// The changes from `before` to `after`; `live` the hosts registered when `after` was seen.
std::vector<ShardChange> DiffMaps(const ReplicaMap& before, const ReplicaMap& after,
                                  const std::set<int>& live);

// The recent changes of a job's replica map, from every map seen in turn (the first one is the
// baseline). Keeps the newest `keep`.
class ReplicaHistory {
 public:
  explicit ReplicaHistory(size_t keep = 200) : keep_(keep) {}
  void Observe(const ReplicaMap& m, const std::set<int>& live, int64_t now_ms);
  const std::deque<ShardChange>& changes() const { return changes_; }
  int64_t failovers() const { return failovers_; }
  int64_t handovers() const { return handovers_; }

 private:
  size_t keep_;
  std::optional<ReplicaMap> last_;
  std::deque<ShardChange> changes_;
  int64_t failovers_ = 0, handovers_ = 0;
};

}  // namespace tessera
