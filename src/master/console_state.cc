// Console state (see console_state.h).
#include "master/console_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

namespace tessera::master {

namespace {

void Enter(NodeView& n, const std::string& state, int64_t now_ms) {
  n.state = state;
  n.since_ms = now_ms;
  n.history.emplace_back(state, now_ms);
  if (n.history.size() > 10) n.history.erase(n.history.begin());
}

}  // namespace

std::vector<std::string> NodeTracker::Departing(const std::string& kind, const std::vector<Live>& live,
                                                int64_t revision) const {
  if (auto newest = revision_.find(kind);
      revision > 0 && newest != revision_.end() && revision < newest->second)
    return {};
  std::set<std::string> present;
  for (const auto& l : live) present.insert(l.name);
  std::vector<std::string> out;
  for (const auto& [key, n] : nodes_) {
    if (key.first == kind && !present.count(key.second) && n.state != "lost" && n.state != "finished")
      out.push_back(key.second);
  }
  return out;
}

bool NodeTracker::Update(const std::string& kind, const std::vector<Live>& live, int64_t now_ms,
                         const std::map<std::string, int64_t>& left, int64_t revision) {
  if (revision > 0) {
    int64_t& newest = revision_[kind];
    if (revision < newest) return false;
    newest = revision;
  }
  std::set<std::string> present;
  for (const auto& l : live) {
    present.insert(l.name);
    auto [it, inserted] = nodes_.try_emplace({kind, l.name});
    NodeView& n = it->second;
    if (inserted) {
      n.kind = kind;
      n.name = l.name;
      Enter(n, "alive", now_ms);
    } else if (n.epoch != l.epoch) {
      // Back (or replaced) under a new registration.
      Enter(n, "restarted", now_ms);
      ++n.restarts;
    }
    n.epoch = l.epoch;
    n.address = l.address;
    n.info = l.info;
    n.last_seen_ms = now_ms;
  }
  for (auto& [key, n] : nodes_) {
    if (key.first != kind || present.count(key.second) || n.state == "lost" || n.state == "finished")
      continue;
    auto l = left.find(key.second);
    Enter(n, l != left.end() && l->second == n.epoch ? "finished" : "lost", now_ms);
  }
  return true;
}

std::vector<NodeView> NodeTracker::Nodes() const {
  std::vector<NodeView> out;
  for (const auto& [key, n] : nodes_) out.push_back(n);
  return out;
}

bool NodeTracker::Known(const std::string& kind, const std::string& name) const {
  return nodes_.count({kind, name}) > 0;
}

int64_t CostHistory::Add(CostPoint p) {
  p.seq = next_seq_++;
  points_.push_back(std::move(p));
  while (points_.size() > capacity_) points_.pop_front();
  return points_.back().seq;
}

bool CostHistory::HasEvaluation(const CostPoint& p) const {
  return std::any_of(points_.rbegin(), points_.rend(), [&](const CostPoint& q) {
    return !q.metric.empty() && q.metric == p.metric && q.pass == p.pass && q.step == p.step &&
           q.value == p.value;
  });
}

std::vector<CostPoint> CostHistory::Since(int64_t since, size_t limit) const {
  std::vector<CostPoint> out;
  auto it = std::upper_bound(points_.begin(), points_.end(), since,
                             [](int64_t s, const CostPoint& p) { return s < p.seq; });
  for (; it != points_.end() && out.size() < limit; ++it) out.push_back(*it);
  return out;
}

void CostHistory::Restore(std::vector<CostPoint> points) {
  std::sort(points.begin(), points.end(),
            [](const CostPoint& a, const CostPoint& b) { return a.seq < b.seq; });
  points_.assign(points.begin(), points.end());
  while (points_.size() > capacity_) points_.pop_front();
  next_seq_ = points_.empty() ? 1 : points_.back().seq + 1;
}

std::string CostHistory::ToJson(const std::vector<CostPoint>& points) {
  auto a = nlohmann::json::array();
  for (const auto& p : points) {
    nlohmann::json j = {{"seq", p.seq}, {"time_ms", p.time_ms}, {"step", p.step}, {"pass", p.pass}};
    if (p.metric.empty()) {
      j["trainer"] = p.trainer;
      j["cost"] = p.cost;
    } else {
      j["metric"] = p.metric;
      j["value"] = p.value;
    }
    a.push_back(std::move(j));
  }
  return a.dump();
}

StatusOr<std::vector<CostPoint>> CostHistory::FromJson(const std::string& json) {
  auto a = nlohmann::json::parse(json, nullptr, false);
  if (a.is_discarded() || !a.is_array()) return Status::DataLoss("cost history is not a JSON array");
  std::vector<CostPoint> out;
  try {
    for (const auto& j : a) {
      CostPoint p;
      p.seq = j.at("seq").get<int64_t>();
      p.time_ms = j.value("time_ms", int64_t{0});
      p.step = j.value("step", int64_t{0});
      p.pass = j.value("pass", 0);
      p.trainer = j.value("trainer", "");
      p.cost = j.value("cost", 0.0);
      p.metric = j.value("metric", "");
      p.value = j.value("value", 0.0);
      out.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::DataLoss(std::string("cost history: ") + e.what());
  }
  return out;
}

}  // namespace tessera::master
