// ViewShards, DiffMaps and ReplicaHistory (see replica_view.h).
#include "job/replica_view.h"

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace tessera {

PserverHosts ParseHosts(const std::vector<std::pair<std::string, std::string>>& registrations) {
  PserverHosts out;
  for (const auto& [name, value] : registrations) {
    auto index = ParseInt64(name, "host");
    if (!index.ok() || *index < 0 || *index > INT32_MAX) continue;
    const int h = static_cast<int>(*index);
    out.live.insert(h);
    out.values[h] = value;
    auto v = nlohmann::json::parse(value, nullptr, false);
    if (v.is_object() && v.value("leaving", false)) out.leaving.insert(h);
  }
  return out;
}

std::vector<ShardView> ViewShards(const ReplicaMap& m, const std::set<int>& live,
                                  const std::set<int>& leaving, bool elastic) {
  const std::vector<int> live_list(live.begin(), live.end());
  std::vector<int> staying, leaving_list;
  for (int h : live) (leaving.count(h) ? leaving_list : staying).push_back(h);
  std::set<int> copying;
  for (const auto& c : m.RestorePlan(staying)) copying.insert(c.slot);
  const auto moves = elastic || !leaving_list.empty() ? m.BalancePlan(live_list, leaving_list)
                                                      : std::vector<ReplicaMap::Move>{};
  std::vector<ShardView> out;
  for (int s = 0; s < m.slots(); ++s) {
    const auto& holders = m.HoldersOf(s);
    ShardView v;
    v.shard = s;
    v.primary = holders.front();
    v.backups.assign(holders.begin() + 1, holders.end());
    const bool gone = std::any_of(holders.begin(), holders.end(), [&](int h) { return !live.count(h); });
    auto move =
        std::find_if(moves.begin(), moves.end(), [&](const ReplicaMap::Move& mv) { return mv.slot == s; });
    if (gone) {
      v.state = "failing over";
    } else if (move != moves.end()) {
      v.state = "moving";
      v.moving_to = move->to;
    } else if (static_cast<int>(holders.size()) < m.replicas()) {
      v.state = copying.count(s) ? "copying" : "under-replicated";
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<ShardChange> DiffMaps(const ReplicaMap& before, const ReplicaMap& after,
                                  const std::set<int>& live) {
  std::vector<ShardChange> out;
  const int shards = std::min(before.slots(), after.slots());
  for (int s = 0; s < shards; ++s) {
    const auto& b = before.HoldersOf(s);
    const auto& a = after.HoldersOf(s);
    const bool new_primary = a.front() != b.front();
    if (new_primary) {
      out.push_back(
          {s, live.count(b.front()) ? "handover" : "failover", b.front(), a.front(), after.epoch(), 0});
    }
    for (int h : a) {
      if (std::find(b.begin(), b.end(), h) == b.end() && !(new_primary && h == a.front()))
        out.push_back({s, "copy", -1, h, after.epoch(), 0});
    }
    for (int h : b) {
      if (std::find(a.begin(), a.end(), h) == a.end() && !(new_primary && h == b.front()))
        out.push_back({s, "dropped", h, -1, after.epoch(), 0});
    }
  }
  return out;
}

void ReplicaHistory::Observe(const ReplicaMap& m, const std::set<int>& live, int64_t now_ms) {
  if (last_ && m.epoch() <= last_->epoch()) return;  // the same map, or an older one read late
  if (last_ && last_->slots() == m.slots()) {
    for (auto c : DiffMaps(*last_, m, live)) {
      c.at_ms = now_ms;
      failovers_ += c.kind == "failover";
      handovers_ += c.kind == "handover";
      changes_.push_back(std::move(c));
      if (changes_.size() > keep_) changes_.pop_front();
    }
  }
  last_ = m;
}

}  // namespace tessera
