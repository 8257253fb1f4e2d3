// Model files (see model_file.h).
#include "tessera/model_file.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/digest.h"
#include "common/files.h"

namespace tessera::models {

const ModelTensor* ModelFile::Find(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status WriteModelFile(const std::string& path, const ModelFile& model) {
  nlohmann::json header;
  header["format"] = "tessera-model";
  header["version"] = 1;
  header["job"] = model.job;
  header["step"] = model.step;
  header["created_ms"] = model.created_ms;
  std::string data;
  auto tensors = nlohmann::json::array();
  for (const auto& t : model.tensors) {
    nlohmann::json j = {{"name", t.name}, {"kind", t.sparse ? "sparse" : "dense"}, {"offset", data.size()}};
    if (t.sparse) {
      // Rows in key order, so the same model always gives the same bytes.
      std::vector<size_t> order(t.keys.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.keys[a] < t.keys[b]; });
      for (size_t i : order) data.append(reinterpret_cast<const char*>(&t.keys[i]), 8);
      for (size_t i : order) {
        data.append(reinterpret_cast<const char*>(t.values.data() + i * t.dim), t.dim * sizeof(float));
      }
      j["dim"] = t.dim;
      j["rows"] = t.keys.size();
    } else {
      if (static_cast<int64_t>(t.values.size()) != t.size) {
        return Status::InvalidArgument("tensor '" + t.name + "' has " + std::to_string(t.values.size()) +
                                       " values, not " + std::to_string(t.size));
      }
      data.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
      j["size"] = t.size;
    }
    tensors.push_back(j);
  }
  header["tensors"] = tensors;
  std::string h = header.dump();
  std::string out = "TSM1";
  uint64_t hl = h.size();
  out.append(reinterpret_cast<const char*>(&hl), 8);
  out += h;
  out += data;
  std::string digest = Sha256Hex(out);
  out += "TSMEND" + digest;
  return WriteFileAtomic(path, out);
}

StatusOr<ModelFile> ReadModelFile(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto bad = [&](const std::string& what) { return Status::DataLoss("model file '" + path + "': " + what); };
  if (bytes.size() < 4 + 8 + 6 + 64 || bytes.compare(0, 4, "TSM1") != 0)
    return bad("not a Tessera model file");
  size_t body = bytes.size() - 70;
  if (bytes.compare(body, 6, "TSMEND") != 0) return bad("truncated (no trailer)");
  if (Sha256Hex(std::string_view(bytes).substr(0, body)) != bytes.substr(body + 6))
    return bad("digest mismatch (corrupt)");
  uint64_t hl;
  std::memcpy(&hl, bytes.data() + 4, 8);
  if (hl > body - 12) return bad("header length out of range");
  auto header = nlohmann::json::parse(bytes.substr(12, hl), nullptr, false);
  if (header.is_discarded()) return bad("header is not JSON");
  const char* data = bytes.data() + 12 + hl;
  const size_t data_size = body - 12 - hl;
  ModelFile m;
  try {
    m.job = header.value("job", "");
    m.step = header.value("step", int64_t{0});
    m.created_ms = header.value("created_ms", int64_t{0});
    for (const auto& j : header.at("tensors")) {
      ModelTensor t;
      t.name = j.at("name").get<std::string>();
      t.sparse = j.at("kind").get<std::string>() == "sparse";
      size_t off = j.at("offset").get<size_t>();
      if (t.sparse) {
        t.dim = j.at("dim").get<int>();
        size_t rows = j.at("rows").get<size_t>();
        size_t need = rows * 8 + rows * t.dim * sizeof(float);
        if (off > data_size || need > data_size - off)
          return bad("tensor '" + t.name + "' runs past the data");
        t.keys.resize(rows);
        std::memcpy(t.keys.data(), data + off, rows * 8);
        t.values.resize(rows * t.dim);
        std::memcpy(t.values.data(), data + off + rows * 8, rows * t.dim * sizeof(float));
      } else {
        t.size = j.at("size").get<int64_t>();
        size_t need = static_cast<size_t>(t.size) * sizeof(float);
        if (off > data_size || need > data_size - off)
          return bad("tensor '" + t.name + "' runs past the data");
        t.values.resize(t.size);
        std::memcpy(t.values.data(), data + off, need);
      }
      m.tensors.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("header: ") + e.what());
  }
  return m;
}

}  // namespace tessera::models
