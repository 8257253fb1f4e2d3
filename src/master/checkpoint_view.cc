// CheckpointView (see checkpoint_view.h).
#include "master/checkpoint_view.h"

#include <filesystem>

#include "checkpoint/checkpoint_probe.h"

namespace tessera::master {

constexpr char kNotVisible[] = "not visible from the master";

nlohmann::json CheckpointView::Records(const std::string& job, int index, const std::string& records_value,
                                       const std::string& dir) {
  auto c = nlohmann::json::parse(records_value, nullptr, false);
  auto list = c.is_object() ? c.value("checkpoints", nlohmann::json::array()) : nlohmann::json::array();
  if (!list.is_array()) return nlohmann::json::array();
  for (auto& rec : list) {
    if (!rec.is_object()) continue;
    // A delta needs every file of its chain: the first one that is not verified, base first,
    // names the record's state ("base: file missing").
    std::string state = "verified";
    auto chain = rec.value("chain", nlohmann::json::array());
    for (size_t i = 0; chain.is_array() && i < chain.size() && state == "verified"; ++i) {
      if (!chain[i].is_object()) continue;
      std::string s = State(job, index, dir, chain[i].value("uuid", ""), chain[i].value("digest", ""));
      if (s != "verified")
        state = s == kNotVisible ? s : (i == 0 ? "base: " : "delta " + std::to_string(i) + ": ") + s;
    }
    if (state == "verified") state = State(job, index, dir, rec.value("uuid", ""), rec.value("digest", ""));
    rec["digest_state"] = state;
  }
  return list;
}

std::string CheckpointView::State(const std::string& job, int index, const std::string& dir,
                                  const std::string& uuid, const std::string& digest) {
  if (dir.empty() || uuid.empty()) return kNotVisible;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = states_.find(uuid); it != states_.end()) return it->second;
  }
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return kNotVisible;  // may become visible later: not kept
  std::string state;
  switch (ProbeCheckpointFile(CheckpointPath(dir, job, index, uuid), digest)) {
    case CheckpointFileState::kGood:
      state = "verified";
      break;
    case CheckpointFileState::kCorrupt:
      state = "digest mismatch";
      break;
    case CheckpointFileState::kMissing:
      state = "file missing";
      break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  states_[uuid] = state;
  return state;
}

}  // namespace tessera::master
