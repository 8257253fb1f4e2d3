// Manifest: the description of a data set, stored as <store>/<name>/manifest.json and written
// last, so a data set without a manifest is not a data set. It lists every chunk (part file,
// offset, records, bytes, checksum) in the order the records were written.
// A value type; thread-safe as values are.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "recordio/file.h"
#include "tessera/status.h"

namespace tessera::dataset {

struct Manifest {
  std::string name;
  std::string format;       // the upload format: text, list, idx, csv, libsvm
  std::string record_type;  // "line" (text) or "example" (tessera.data.Example)
  std::string compressor;   // none or zstd
  int64_t chunk_bytes = 0;  // target raw chunk size
  int parts = 0;
  int64_t records = 0;
  int64_t bytes = 0;  // stored bytes in all parts
  int64_t created_ms = 0;
  nlohmann::json meta = nlohmann::json::object();  // format details (image shape, csv columns, ...)
  std::vector<recordio::ChunkInfo> chunks;

  static std::string PartName(int part);  // "part-00003.rio"
  std::string ToJson() const;
  static StatusOr<Manifest> FromJson(const std::string& json, const std::string& where);
  // Checks internal consistency (chunk parts in range, record counts add up).
  Status Validate(const std::string& where) const;
};

}  // namespace tessera::dataset
