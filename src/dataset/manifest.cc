// Manifest JSON (see manifest.h).
#include "dataset/manifest.h"

#include <cstdio>

namespace tessera::dataset {

std::string Manifest::PartName(int part) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "part-%05d.rio", part);
  return buf;
}

std::string Manifest::ToJson() const {
  nlohmann::json j;
  j["name"] = name;
  j["format"] = format;
  j["record_type"] = record_type;
  j["compressor"] = compressor;
  j["chunk_bytes"] = chunk_bytes;
  j["parts"] = parts;
  j["records"] = records;
  j["bytes"] = bytes;
  j["created_ms"] = created_ms;
  j["meta"] = meta;
  // Chunks as compact rows: [part, offset, records, bytes, raw_bytes, crc].
  auto rows = nlohmann::json::array();
  for (const auto& c : chunks) rows.push_back({c.part, c.offset, c.records, c.bytes, c.raw_bytes, c.crc});
  j["chunks"] = rows;
  return j.dump(1);
}

StatusOr<Manifest> Manifest::FromJson(const std::string& json, const std::string& where) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::DataLoss(where + ": manifest is not valid JSON");
  Manifest m;
  try {
    m.name = j.at("name").get<std::string>();
    m.format = j.at("format").get<std::string>();
    m.record_type = j.at("record_type").get<std::string>();
    m.compressor = j.at("compressor").get<std::string>();
    m.chunk_bytes = j.at("chunk_bytes").get<int64_t>();
    m.parts = j.at("parts").get<int>();
    m.records = j.at("records").get<int64_t>();
    m.bytes = j.at("bytes").get<int64_t>();
    m.created_ms = j.value("created_ms", int64_t{0});
    m.meta = j.value("meta", nlohmann::json::object());
    for (const auto& row : j.at("chunks")) {
      recordio::ChunkInfo c;
      c.part = row.at(0).get<int>();
      c.offset = row.at(1).get<int64_t>();
      c.records = row.at(2).get<uint32_t>();
      c.bytes = row.at(3).get<uint64_t>();
      c.raw_bytes = row.at(4).get<uint64_t>();
      c.crc = row.at(5).get<uint32_t>();
      m.chunks.push_back(c);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::DataLoss(where + ": manifest: " + e.what());
  }
  TESSERA_RETURN_IF_ERROR(m.Validate(where));
  return m;
}

Status Manifest::Validate(const std::string& where) const {
  if (record_type != "line" && record_type != "example") {
    return Status::DataLoss(where + ": unknown record type '" + record_type + "'");
  }
  int64_t total = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].part < 0 || chunks[i].part >= parts) {
      return Status::DataLoss(where + ": chunk " + std::to_string(i) + " names part " +
                              std::to_string(chunks[i].part) + " of " + std::to_string(parts));
    }
    total += chunks[i].records;
  }
  if (total != records) {
    return Status::DataLoss(where + ": chunks hold " + std::to_string(total) +
                            " records but the manifest says " + std::to_string(records));
  }
  return Status::OK();
}

}  // namespace tessera::dataset
