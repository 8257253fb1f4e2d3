// Data set writer and reader (see dataset.h).
#include "dataset/dataset.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "common/clock.h"
#include "common/files.h"
#include "common/random.h"
#include "common/strings.h"

namespace tessera::dataset {

namespace fs = std::filesystem;

StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(const std::string& store,
                                                               const std::string& name,
                                                               const std::string& format,
                                                               const std::string& record_type,
                                                               WriterOptions options) {
  TESSERA_RETURN_IF_ERROR(ValidateName(name, "data set"));
  if (options.parts < 1 || options.parts > 100000)
    return Status::InvalidArgument("--parts must be 1..100000");
  if (options.chunk_bytes < 1024) return Status::InvalidArgument("chunk size must be at least 1 KiB");
  std::error_code ec;
  if (!fs::is_directory(store, ec)) {
    fs::create_directories(store, ec);
    if (ec) return Status::Unavailable("cannot create store '" + store + "': " + ec.message());
  }
  std::string final_dir = store + "/" + name;
  if (fs::exists(final_dir, ec) && !options.force) {
    return Status::AlreadyExists("data set '" + name + "' already exists in " + store +
                                 " (pass --force to replace it)");
  }
  std::unique_ptr<DatasetWriter> w(new DatasetWriter());
  w->store_ = store;
  w->name_ = name;
  w->options_ = options;
  w->tmp_ = store + "/.tmp-" + name + "-" + NewUuid().substr(0, 8);
  fs::create_directory(w->tmp_, ec);
  if (ec) return Status::Unavailable("cannot create '" + w->tmp_ + "': " + ec.message());
  for (int p = 0; p < options.parts; ++p) {
    TESSERA_ASSIGN_OR_RETURN(auto f, recordio::ChunkFile::Create(w->tmp_ + "/" + Manifest::PartName(p)));
    w->files_.push_back(std::move(f));
  }
  w->part_sizes_.assign(options.parts, 0);
  w->builder_ = std::make_unique<recordio::ChunkBuilder>(options.compressor, options.chunk_bytes);
  w->manifest_.name = name;
  w->manifest_.format = format;
  w->manifest_.record_type = record_type;
  w->manifest_.compressor = recordio::CompressorName(options.compressor);
  w->manifest_.chunk_bytes = static_cast<int64_t>(options.chunk_bytes);
  w->manifest_.parts = options.parts;
  return w;
}

DatasetWriter::~DatasetWriter() {
  if (!committed_ && !tmp_.empty()) {
    files_.clear();
    (void)RemoveAll(tmp_);
  }
}

Status DatasetWriter::Add(std::string_view record) {
  builder_->Add(record);
  ++records_;
  if (builder_->full()) return FlushChunk();
  return Status::OK();
}

Status DatasetWriter::FlushChunk() {
  if (builder_->empty()) return Status::OK();
  recordio::ChunkHeader h;
  builder_->Take(&encoded_, &h);
  int part = static_cast<int>(manifest_.chunks.size() % files_.size());
  TESSERA_ASSIGN_OR_RETURN(int64_t offset, files_[part]->Append(encoded_));
  recordio::ChunkInfo c;
  c.part = part;
  c.offset = offset;
  c.records = h.records;
  c.bytes = encoded_.size();
  c.raw_bytes = h.raw_size;
  c.crc = h.crc;
  manifest_.chunks.push_back(c);
  bytes_ += static_cast<int64_t>(encoded_.size());
  return Status::OK();
}

Status DatasetWriter::Commit(const nlohmann::json& meta) {
  TESSERA_RETURN_IF_ERROR(FlushChunk());
  for (auto& f : files_) TESSERA_RETURN_IF_ERROR(f->Close());
  manifest_.records = records_;
  manifest_.bytes = bytes_;
  manifest_.created_ms = WallMillis();
  manifest_.meta = meta;
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(tmp_ + "/manifest.json", manifest_.ToJson()));
  TESSERA_RETURN_IF_ERROR(FsyncPath(tmp_));
  std::string final_dir = store_ + "/" + name_;
  std::error_code ec;
  std::string trash;
  if (fs::exists(final_dir, ec)) {
    if (!options_.force) {
      return Status::AlreadyExists("data set '" + name_ + "' appeared in " + store_ + " during the upload");
    }
    trash = store_ + "/.trash-" + name_ + "-" + NewUuid().substr(0, 8);
    fs::rename(final_dir, trash, ec);
    if (ec) return Status::Unavailable("cannot move the old data set aside: " + ec.message());
  }
  fs::rename(tmp_, final_dir, ec);
  if (ec) return Status::Unavailable("cannot move the data set into place: " + ec.message());
  committed_ = true;
  TESSERA_RETURN_IF_ERROR(FsyncPath(store_));
  if (!trash.empty()) (void)RemoveAll(trash);
  return Status::OK();
}

StatusOr<Manifest> LoadManifest(const std::string& dir) {
  auto text = ReadFile(dir + "/manifest.json");
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status::NotFound("no data set at '" + dir + "' (no manifest.json)");
    }
    return text.status();
  }
  return Manifest::FromJson(*text, dir + "/manifest.json");
}

StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::Open(const std::string& store,
                                                             const std::string& name) {
  TESSERA_RETURN_IF_ERROR(ValidateName(name, "data set"));
  std::unique_ptr<DatasetReader> r(new DatasetReader());
  r->dir_ = store + "/" + name;
  TESSERA_ASSIGN_OR_RETURN(r->manifest_, LoadManifest(r->dir_));
  return r;
}

Status DatasetReader::ReadChunk(size_t index, std::vector<std::string_view>* records) {
  if (index >= manifest_.chunks.size())
    return Status::OutOfRange("chunk " + std::to_string(index) + " does not exist");
  const auto& c = manifest_.chunks[index];
  std::string part = Manifest::PartName(c.part);
  std::string name = manifest_.name + "/" + part + " chunk " + std::to_string(index) + " at offset " +
                     std::to_string(c.offset);
  return recordio::ReadChunkAt(dir_ + "/" + part, c.offset, &c, name, &stored_, &scratch_, records);
}

StatusOr<Manifest> FindDataset(const std::string& store, const std::string& name) {
  std::error_code ec;
  if (store.empty()) return Status::InvalidArgument("no store given (--store or TESSERA_STORE)");
  if (!fs::is_directory(store, ec)) {
    return Status::NotFound("store '" + store + "' " +
                            (fs::exists(store, ec) ? "is not a directory" : "does not exist") +
                            " (--store or TESSERA_STORE)");
  }
  auto m = LoadManifest(store + "/" + name);
  if (m.ok() || m.status().code() != StatusCode::kNotFound) return m;
  auto all = ListDatasets(store);
  std::vector<std::string> names;
  if (all.ok()) {
    for (const auto& d : *all) names.push_back(d.name);
  }
  return Status::NotFound("data set '" + name + "' is not in store '" + store + "' (" +
                          (names.empty() ? std::string("it holds no data sets; make one with `tessera upload`")
                                         : "it holds: " + Join(names, ", ")) +
                          ")");
}

StatusOr<std::vector<Manifest>> ListDatasets(const std::string& store, int* unfinished) {
  std::error_code ec;
  if (!fs::is_directory(store, ec)) return Status::NotFound("store '" + store + "' is not a directory");
  std::vector<Manifest> out;
  int stray = 0;
  for (const auto& e : fs::directory_iterator(store, ec)) {
    std::string n = e.path().filename().string();
    if (n.empty() || n[0] == '.') {
      stray += StartsWith(n, ".tmp-") || StartsWith(n, ".trash-");
      continue;
    }
    if (!e.is_directory()) continue;
    auto m = LoadManifest(e.path().string());
    if (m.ok()) out.push_back(std::move(*m));
  }
  if (ec) return Status::Unavailable("cannot list store '" + store + "': " + ec.message());
  std::sort(out.begin(), out.end(), [](const Manifest& a, const Manifest& b) { return a.name < b.name; });
  if (unfinished) *unfinished = stray;
  return out;
}

}  // namespace tessera::dataset
