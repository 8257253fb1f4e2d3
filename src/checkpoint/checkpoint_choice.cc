// Checkpoint choice (see checkpoint_choice.h).
#include "checkpoint/checkpoint_choice.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace tessera {

std::vector<CheckpointLink> CheckpointRecord::Files() const {
  std::vector<CheckpointLink> out = chain;
  out.push_back({uuid, digest, version, bytes});
  return out;
}

std::string CheckpointRecord::Describe() const {
  if (!delta()) return "whole, " + HumanBytes(static_cast<double>(bytes));
  return "delta " + std::to_string(chain.size()) + " on the base of version " +
         std::to_string(chain[0].version) + ", " + HumanBytes(static_cast<double>(bytes));
}

namespace {

bool IsFileEntry(const nlohmann::json& e) {
  return e.is_object() && e.contains("uuid") && e["uuid"].is_string() && e.contains("digest") &&
         e["digest"].is_string() && e.contains("version") && e["version"].is_number_integer();
}

}  // namespace

std::string EncodeCheckpointRecords(const std::vector<CheckpointRecord>& records) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json e = {
        {"uuid", r.uuid}, {"digest", r.digest}, {"version", r.version}, {"time_ms", r.time_ms}};
    if (r.bytes > 0) e["bytes"] = r.bytes;
    if (r.delta()) {
      nlohmann::json chain = nlohmann::json::array();
      for (const auto& l : r.chain)
        chain.push_back({{"uuid", l.uuid}, {"digest", l.digest}, {"version", l.version}, {"bytes", l.bytes}});
      e["chain"] = std::move(chain);
    }
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
    if (!IsFileEntry(e))
      return Status::DataLoss("checkpoint record has a malformed entry: " + e.dump().substr(0, 200));
    CheckpointRecord r{e["uuid"], e["digest"], e["version"], e.value("time_ms", int64_t{0}),
                       e.value("bytes", int64_t{0})};
    if (e.contains("chain")) {
      if (!e["chain"].is_array())
        return Status::DataLoss("checkpoint record's chain is not a list: " + e.dump().substr(0, 200));
      for (const auto& l : e["chain"]) {
        if (!IsFileEntry(l))
          return Status::DataLoss("checkpoint record has a malformed chain entry: " +
                                  l.dump().substr(0, 200));
        r.chain.push_back({l["uuid"], l["digest"], l["version"], l.value("bytes", int64_t{0})});
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<CheckpointRecord> WithNewCheckpoint(std::vector<CheckpointRecord> records, CheckpointRecord added,
                                                size_t keep) {
  records.insert(records.begin(), std::move(added));
  if (records.size() > keep) records.resize(keep);
  return records;
}

ChainFileState StateOfChain(const CheckpointRecord& record,
                            const std::map<std::string, CheckpointFileState>& files) {
  for (size_t i = 0; i <= record.chain.size(); ++i) {
    const std::string& uuid = i < record.chain.size() ? record.chain[i].uuid : record.uuid;
    auto it = files.find(uuid);
    auto state = it == files.end() ? CheckpointFileState::kMissing : it->second;
    if (state == CheckpointFileState::kGood) continue;
    if (i == record.chain.size()) return {state, "its file"};
    if (i == 0) return {state, "its base " + uuid};
    return {state, "its delta " + uuid + " (version " + std::to_string(record.chain[i].version) + ")"};
  }
  return {};
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
    const ChainFileState s = StateOfChain(*r, files);
    std::string name = "checkpoint " + r->uuid + " (version " + std::to_string(r->version) + ")";
    if (s.state == CheckpointFileState::kGood) {
      c.load = *r;
      break;  // older ones are not needed
    }
    c.refused.push_back(name + ": " + s.which +
                        (s.state == CheckpointFileState::kMissing
                             ? " is missing"
                             : " does not match its recorded digest (corrupt or truncated)"));
  }
  return c;
}

}  // namespace tessera
