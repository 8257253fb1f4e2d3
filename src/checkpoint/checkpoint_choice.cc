// Checkpoint choice (see checkpoint_choice.h).
#include "checkpoint/checkpoint_choice.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tessera {

std::string EncodeCheckpointRecords(const std::vector<CheckpointRecord>& records) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json e = {
        {"uuid", r.uuid}, {"digest", r.digest}, {"version", r.version}, {"time_ms", r.time_ms}};
    if (r.bytes > 0) e["bytes"] = r.bytes;
    list.push_back(std::move(e));
  }
  return nlohmann::json{{"checkpoints", list}}.dump();
}

StatusOr<std::vector<CheckpointRecord>> DecodeCheckpointRecords(const std::string& value) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("checkpoints") || !j["checkpoints"].is_array()) {
    return Status::DataLoss("checkpoint record is not {\"checkpoints\": [...]}: " + value.substr(0, 200));
  }
  std::vector<CheckpointRecord> out;
  for (const auto& e : j["checkpoints"]) {
    if (!e.is_object() || !e.contains("uuid") || !e["uuid"].is_string() || !e.contains("digest") ||
        !e["digest"].is_string() || !e.contains("version") || !e["version"].is_number_integer()) {
      return Status::DataLoss("checkpoint record has a malformed entry: " + e.dump().substr(0, 200));
    }
    out.push_back(
        {e["uuid"], e["digest"], e["version"], e.value("time_ms", int64_t{0}), e.value("bytes", int64_t{0})});
  }
  return out;
}

std::vector<CheckpointRecord> WithNewCheckpoint(std::vector<CheckpointRecord> records, CheckpointRecord added,
                                                size_t keep) {
  records.insert(records.begin(), std::move(added));
  if (records.size() > keep) records.resize(keep);
  return records;
}

CheckpointChoice ChooseCheckpoint(const std::vector<CheckpointRecord>& records,
                                  const std::map<std::string, CheckpointFileState>& files) {
  std::vector<const CheckpointRecord*> order;
  for (const auto& r : records) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const CheckpointRecord* a, const CheckpointRecord* b) {
    return a->version != b->version ? a->version > b->version : a->time_ms > b->time_ms;
  });
  CheckpointChoice c;
  for (const CheckpointRecord* r : order) {
    auto it = files.find(r->uuid);
    auto state = it == files.end() ? CheckpointFileState::kMissing : it->second;
    std::string name = "checkpoint " + r->uuid + " (version " + std::to_string(r->version) + ")";
    if (state == CheckpointFileState::kGood) {
      c.load = *r;
      break;  // older ones are not needed
    }
    c.refused.push_back(name +
                        (state == CheckpointFileState::kMissing
                             ? ": its file is missing"
                             : ": its file does not match its recorded digest (corrupt or truncated)"));
  }
  return c;
}

}  // namespace tessera
