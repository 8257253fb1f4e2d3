// ReplicaMap (see replica_map.h).
#include "job/replica_map.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

bool Contains(const std::vector<int>& holders, int p) {
  return std::find(holders.begin(), holders.end(), p) != holders.end();
}

std::string SlotList(const std::vector<int>& slots) {
  std::string out;
  for (size_t i = 0; i < slots.size() && i < 10; ++i) out += (i ? ", " : "") + std::to_string(slots[i]);
  if (slots.size() > 10) out += " and " + std::to_string(slots.size() - 10) + " more";
  return out;
}

}  // namespace

StatusOr<ReplicaMap> ReplicaMap::Place(int slots, int pservers, int replicas) {
  if (pservers < 1) return Status::InvalidArgument("a job needs at least one pserver");
  if (replicas < 1 || replicas > pservers) {
    return Status::InvalidArgument("--replicas " + std::to_string(replicas) + " needs between 1 and " +
                                   std::to_string(pservers) +
                                   " (the pservers: each copy on a different one)");
  }
  if (slots < pservers) {
    return Status::InvalidArgument(std::to_string(slots) + " slots cannot give each of " +
                                   std::to_string(pservers) + " pservers one");
  }
  ReplicaMap m;
  m.pservers_ = pservers;
  m.replicas_ = replicas;
  m.holders_.resize(slots);
  // The backups of slot s sit at offsets o, o+1, ... from its primary, o cycling over
  // 1..P-R+1 from one round of P slots to the next: a lost pserver's primaries fall to several
  // others, not all to its neighbour.
  const int spread = pservers - replicas + 1;
  for (int s = 0; s < slots; ++s) {
    const int primary = s % pservers;
    m.holders_[s].push_back(primary);
    const int o = 1 + (s / pservers) % spread;
    for (int k = 0; k + 1 < replicas; ++k) m.holders_[s].push_back((primary + o + k) % pservers);
  }
  return m;
}

StatusOr<ReplicaMap> ReplicaMap::PrimariesOnly(int slots, int pservers, int replicas, int first) {
  if (first == 0) first = pservers;
  if (first < 1 || first > pservers) {
    return Status::InvalidArgument("a job of up to " + std::to_string(pservers) +
                                   " pservers cannot start with " + std::to_string(first));
  }
  TESSERA_ASSIGN_OR_RETURN(ReplicaMap m, Place(slots, pservers, replicas));
  for (int s = 0; s < slots; ++s) m.holders_[s] = {s % first};
  return m;
}

std::vector<int> ReplicaMap::SlotsHeldBy(int p) const {
  std::vector<int> out;
  for (int s = 0; s < slots(); ++s)
    if (Contains(holders_[s], p)) out.push_back(s);
  return out;
}

std::vector<ReplicaMap::Move> ReplicaMap::BalancePlan(const std::vector<int>& live,
                                                      const std::vector<int>& leaving) const {
  std::vector<int> takers;  // live, in range, not leaving
  for (int p : live)
    if (p >= 0 && p < pservers_ && !Contains(leaving, p) && !Contains(takers, p)) takers.push_back(p);
  std::sort(takers.begin(), takers.end());
  std::vector<Move> plan;
  if (takers.empty()) return plan;
  std::vector<int> primaries(pservers_, 0);
  std::vector<int> primary_of(holders_.size());
  for (size_t s = 0; s < holders_.size(); ++s) {
    primary_of[s] = holders_[s].front();
    ++primaries[primary_of[s]];
  }
  for (int guard = 0; guard <= slots(); ++guard) {
    int from = -1;  // a pserver that may not keep primaries (leaving, dead), else the fullest taker
    for (int p = 0; p < pservers_ && from < 0; ++p)
      if (primaries[p] > 0 && !Contains(takers, p)) from = p;
    const bool must = from >= 0;
    if (!must) {
      for (int p : takers)
        if (from < 0 || primaries[p] > primaries[from]) from = p;
    }
    int to = takers.front();
    for (int p : takers)
      if (primaries[p] < primaries[to]) to = p;
    if (!must && primaries[from] - primaries[to] <= 1) break;  // balanced
    int slot = 0;
    while (primary_of[slot] != from) ++slot;
    plan.push_back({slot, from, to});
    primary_of[slot] = to;
    --primaries[from];
    ++primaries[to];
  }
  return plan;
}

StatusOr<ReplicaMap> ReplicaMap::Handover(int slot, int to) const {
  if (slot < 0 || slot >= slots()) return Status::InvalidArgument("no slot " + std::to_string(slot));
  if (to < 0 || to >= pservers_) return Status::InvalidArgument("no pserver " + std::to_string(to));
  ReplicaMap m = *this;
  auto& h = m.holders_[slot];
  if (h.front() == to) {
    return Status::InvalidArgument("pserver " + std::to_string(to) + " is slot " + std::to_string(slot) +
                                   "'s primary already");
  }
  h.erase(std::remove(h.begin(), h.end(), to), h.end());
  h.front() = to;  // in the old primary's place: it leaves the slot, the backups stay
  ++m.epoch_;
  return m;
}

bool ReplicaMap::Holds(int slot, int pserver) const { return Contains(holders_[slot], pserver); }

std::vector<int> ReplicaMap::PrimarySlotsOf(int pserver) const {
  std::vector<int> out;
  for (int s = 0; s < slots(); ++s) {
    if (holders_[s].front() == pserver) out.push_back(s);
  }
  return out;
}

std::vector<int> ReplicaMap::BackupSlotsOf(int pserver) const {
  std::vector<int> out;
  for (int s = 0; s < slots(); ++s) {
    const auto& h = holders_[s];
    if (std::find(h.begin() + 1, h.end(), pserver) != h.end()) out.push_back(s);
  }
  return out;
}

std::vector<int> ReplicaMap::UnderReplicated() const {
  std::vector<int> out;
  for (int s = 0; s < slots(); ++s) {
    if (static_cast<int>(holders_[s].size()) < replicas_) out.push_back(s);
  }
  return out;
}

StatusOr<ReplicaMap> ReplicaMap::FailOver(int dead) const {
  if (dead < 0 || dead >= pservers_) {
    return Status::InvalidArgument("pserver " + std::to_string(dead) + " is not in this job (0.." +
                                   std::to_string(pservers_ - 1) + ")");
  }
  std::vector<int> lost;
  for (int s = 0; s < slots(); ++s) {
    if (holders_[s].size() == 1 && holders_[s].front() == dead) lost.push_back(s);
  }
  if (!lost.empty()) {
    return Status::DataLoss("pserver " + std::to_string(dead) + " held the only copy of slots " +
                            SlotList(lost));
  }
  ReplicaMap m = *this;
  for (auto& h : m.holders_) h.erase(std::remove(h.begin(), h.end(), dead), h.end());
  ++m.epoch_;
  return m;
}

std::vector<ReplicaMap::Copy> ReplicaMap::RestorePlan(const std::vector<int>& live) const {
  std::vector<int> load(pservers_, 0);
  for (const auto& h : holders_)
    for (int p : h) ++load[p];
  std::vector<Copy> plan;
  for (int s : UnderReplicated()) {
    std::vector<int> holders = holders_[s];
    while (static_cast<int>(holders.size()) < replicas_) {
      int best = -1;
      for (int p : live) {
        if (p < 0 || p >= pservers_ || Contains(holders, p)) continue;
        if (best < 0 || load[p] < load[best] || (load[p] == load[best] && p < best)) best = p;
      }
      if (best < 0) break;  // too few live pservers for another copy
      plan.push_back({s, holders.front(), best});
      holders.push_back(best);
      ++load[best];
    }
  }
  return plan;
}

StatusOr<ReplicaMap> ReplicaMap::WithCopies(const std::vector<Copy>& copies) const {
  ReplicaMap m = *this;
  for (const Copy& c : copies) {
    const std::string what = "copy of slot " + std::to_string(c.slot) + " from pserver " +
                             std::to_string(c.from) + " to " + std::to_string(c.to);
    if (c.slot < 0 || c.slot >= slots()) return Status::InvalidArgument(what + ": no such slot");
    auto& h = m.holders_[c.slot];
    if (!Contains(h, c.from)) return Status::InvalidArgument(what + ": the source does not hold the slot");
    if (c.to < 0 || c.to >= pservers_ || Contains(h, c.to))
      return Status::InvalidArgument(what + ": the target is not a pserver without the slot");
    if (static_cast<int>(h.size()) >= replicas_)
      return Status::InvalidArgument(what + ": the slot has its " + std::to_string(replicas_) + " copies");
    h.push_back(c.to);
  }
  ++m.epoch_;
  return m;
}

Status ReplicaMap::Validate() const {
  if (holders_.empty()) return Status::DataLoss("replica map has no slots");
  if (replicas_ < 1 || replicas_ > pservers_)
    return Status::DataLoss("replica map: " + std::to_string(replicas_) + " replicas over " +
                            std::to_string(pservers_) + " pservers");
  for (int s = 0; s < slots(); ++s) {
    const auto& h = holders_[s];
    const std::string where = "replica map: slot " + std::to_string(s);
    if (h.empty()) return Status::DataLoss(where + " has no holder");
    if (static_cast<int>(h.size()) > replicas_)
      return Status::DataLoss(where + " has more holders than replicas");
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i] < 0 || h[i] >= pservers_)
        return Status::DataLoss(where + " names pserver " + std::to_string(h[i]) + ", outside 0.." +
                                std::to_string(pservers_ - 1));
      if (std::find(h.begin(), h.begin() + i, h[i]) != h.begin() + i)
        return Status::DataLoss(where + " names pserver " + std::to_string(h[i]) + " twice");
    }
  }
  return Status::OK();
}

std::string ReplicaMap::ToJson() const {
  nlohmann::json j;
  j["pservers"] = pservers_;
  j["replicas"] = replicas_;
  j["epoch"] = epoch_;
  j["holders"] = holders_;
  return j.dump();
}

StatusOr<ReplicaMap> ReplicaMap::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::DataLoss("replica map is not a JSON object");
  ReplicaMap m;
  try {
    m.pservers_ = j.at("pservers").get<int>();
    m.replicas_ = j.at("replicas").get<int>();
    m.epoch_ = j.at("epoch").get<int64_t>();
    m.holders_ = j.at("holders").get<std::vector<std::vector<int>>>();
  } catch (const nlohmann::json::exception& e) {
    return Status::DataLoss(std::string("replica map: ") + e.what());
  }
  TESSERA_RETURN_IF_ERROR(m.Validate());
  return m;
}

}  // namespace tessera
