// SlotMap (see slot_map.h).
#include "job/slot_map.h"

#include <nlohmann/json.hpp>

namespace tessera {

SlotMap SlotMap::RoundRobin(int slots, int pservers) {
  SlotMap m;
  m.pservers_ = pservers;
  m.owner_.resize(slots);
  for (int s = 0; s < slots; ++s) m.owner_[s] = s % pservers;
  return m;
}

std::vector<int> SlotMap::SlotsOf(int pserver) const {
  std::vector<int> out;
  for (int s = 0; s < slots(); ++s) {
    if (owner_[s] == pserver) out.push_back(s);
  }
  return out;
}

Status SlotMap::Validate() const {
  if (owner_.empty()) return Status::DataLoss("slot map has no slots");
  std::vector<bool> used(pservers_, false);
  for (int s = 0; s < slots(); ++s) {
    if (owner_[s] < 0 || owner_[s] >= pservers_) {
      return Status::DataLoss("slot map: slot " + std::to_string(s) + " names pserver " +
                              std::to_string(owner_[s]) + ", outside 0.." + std::to_string(pservers_ - 1));
    }
    used[owner_[s]] = true;
  }
  for (int p = 0; p < pservers_; ++p) {
    if (!used[p]) return Status::DataLoss("slot map: pserver " + std::to_string(p) + " serves no slot");
  }
  return Status::OK();
}

std::string SlotMap::ToJson() const {
  nlohmann::json j;
  j["pservers"] = pservers_;
  j["owner"] = owner_;
  return j.dump();
}

StatusOr<SlotMap> SlotMap::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::DataLoss("slot map is not a JSON object");
  SlotMap m;
  try {
    m.pservers_ = j.at("pservers").get<int>();
    m.owner_ = j.at("owner").get<std::vector<int>>();
  } catch (const nlohmann::json::exception& e) {
    return Status::DataLoss(std::string("slot map: ") + e.what());
  }
  TESSERA_RETURN_IF_ERROR(m.Validate());
  return m;
}

}  // namespace tessera
