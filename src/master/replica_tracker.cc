// ReplicaTracker (see replica_tracker.h).
#include "master/replica_tracker.h"

#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera::master {

void ReplicaTracker::Poll(etcd::EtcdClient* etcd, const std::string& job, int64_t now_ms) {
  etcd::CallOptions quick;
  quick.retry_timeout = std::chrono::milliseconds(500);
  auto m = etcd->Get(keys::ReplicaMap(job), {}, quick);
  if (!m.ok() || m->kvs.empty()) return;
  auto map = ReplicaMap::FromJson(m->kvs[0].value);
  if (!map.ok()) return;
  auto list = Registry(etcd, keys::PserverHostPrefix(job)).List();
  if (!list.ok()) return;
  std::vector<std::pair<std::string, std::string>> registrations;
  for (const auto& m : list->members) registrations.emplace_back(m.name, m.value);
  PserverHosts hosts = ParseHosts(registrations);
  std::lock_guard<std::mutex> lock(mu_);
  history_.Observe(*map, hosts.live, now_ms);
  map_ = std::move(*map);
  hosts_ = std::move(hosts);
}

nlohmann::json ReplicaTracker::View() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!map_) return nullptr;
  const auto& [live, leaving, values] = hosts_;
  auto hosts = nlohmann::json::array();
  for (const auto& [h, value] : values) {
    auto info = nlohmann::json::parse(value, nullptr, false);
    hosts.push_back({{"host", h},
                     {"leaving", leaving.count(h) > 0},
                     {"info", info.is_object() ? info : nlohmann::json::object()},
                     {"primaries", map_->PrimarySlotsOf(h)},
                     {"backups", map_->BackupSlotsOf(h)}});
  }
  auto shards = nlohmann::json::array();
  for (const auto& s : ViewShards(*map_, live, leaving, elastic_)) {
    nlohmann::json j = {
        {"shard", s.shard}, {"primary", s.primary}, {"backups", s.backups}, {"state", s.state}};
    if (s.moving_to >= 0) j["moving_to"] = s.moving_to;
    shards.push_back(std::move(j));
  }
  auto changes = nlohmann::json::array();
  for (const auto& c : history_.changes()) {
    changes.push_back({{"at_ms", c.at_ms},
                       {"shard", c.shard},
                       {"kind", c.kind},
                       {"from", c.from},
                       {"to", c.to},
                       {"epoch", c.epoch}});
  }
  return {{"map_epoch", map_->epoch()},
          {"replicas", map_->replicas()},
          {"hosts", hosts},
          {"shards", shards},
          {"changes", changes},
          {"failovers", history_.failovers()},
          {"handovers", history_.handovers()}};
}

}  // namespace tessera::master
