// Tessera model files (.tsm): a trained model, all shards merged, in one file that the built-in
// models, `tessera export` and the Python module read and write.
//
// Layout: "TSM1", a u64 little-endian header length, the header (JSON: job, step, created_ms and
// per tensor its name, kind, size or dim and rows, and byte offset in the data section), the
// data section (dense: `size` floats; sparse: `rows` u64 keys then rows*dim floats, keys
// ascending), then "TSMEND" and the SHA-256 (hex) of everything before it.
// Writing is atomic; reading checks the digest. Values are little-endian float32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::models {

struct ModelTensor {
  std::string name;
  bool sparse = false;
  int64_t size = 0;            // dense: elements
  int dim = 0;                 // sparse: row width
  std::vector<uint64_t> keys;  // sparse: one per row, ascending
  std::vector<float> values;   // dense: size; sparse: keys.size() * dim
};

struct ModelFile {
  std::string job;
  int64_t step = 0;
  int64_t created_ms = 0;
  std::vector<ModelTensor> tensors;
  const ModelTensor* Find(const std::string& name) const;
};

Status WriteModelFile(const std::string& path, const ModelFile& model);
StatusOr<ModelFile> ReadModelFile(const std::string& path);

}  // namespace tessera::models
