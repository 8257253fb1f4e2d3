// Data set writer and reader (see dataset.h).
#include "dataset/dataset.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  if (options.append) {
    if (options.force)
      return Status::InvalidArgument("--append adds to a data set; --force replaces one: give one");
    std::unique_ptr<DatasetWriter> w(new DatasetWriter());
    w->store_ = store;
    w->name_ = name;
    w->options_ = options;
    w->manifest_.format = format;
    w->manifest_.record_type = record_type;
    TESSERA_RETURN_IF_ERROR(w->OpenForAppend());
    return w;
  }
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
  std::vector<std::string> parts;
  for (int p = 0; p < options.parts; ++p) parts.push_back(w->tmp_ + "/" + Manifest::PartName(p));
  TESSERA_RETURN_IF_ERROR(w->OpenParts(parts));
  w->manifest_.name = name;
  w->manifest_.format = format;
  w->manifest_.record_type = record_type;
  w->manifest_.compressor = recordio::CompressorName(options.compressor);
  w->manifest_.chunk_bytes = static_cast<int64_t>(options.chunk_bytes);
  w->manifest_.parts = options.parts;
  return w;
}

DatasetWriter::~DatasetWriter() {
  files_.clear();
  if (!committed_) {
    for (const auto& p : tmp_parts_) (void)RemoveAll(p);  // append: its hidden new parts
    if (!tmp_.empty()) (void)RemoveAll(tmp_);             // new data set: its hidden directory
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status DatasetWriter::OpenParts(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    TESSERA_ASSIGN_OR_RETURN(auto f, recordio::ChunkFile::Create(path));
    files_.push_back(std::move(f));
  }
  builder_ = std::make_unique<recordio::ChunkBuilder>(options_.compressor, options_.chunk_bytes);
  return Status::OK();
}

Status DatasetWriter::OpenForAppend() {
  const std::string dir = store_ + "/" + name_;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("data set '" + name_ + "' is not in store '" + store_ +
                            "' (--append adds to an existing one; upload it first without --append)");
  }
  lock_fd_ = ::open((dir + "/.append.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Unavailable("another upload is appending to data set '" + name_ + "' right now");
  }
  TESSERA_ASSIGN_OR_RETURN(old_, LoadManifest(dir));
  if (old_.format != manifest_.format || old_.record_type != manifest_.record_type) {
    return Status::InvalidArgument("data set '" + name_ + "' was uploaded with --format " + old_.format +
                                   "; records appended to it must be too, not --format " + manifest_.format);
  }
  // Part files past the manifest's (left by an append that crashed before its manifest) go.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    bool listed = false;
    for (int p = 0; p < old_.parts && !listed; ++p) listed = f == Manifest::PartName(p);
    if (!listed && (StartsWith(f, "part-") || StartsWith(f, ".tmp-part-")))
      (void)RemoveAll(e.path().string());
  }
  const std::string id = NewUuid().substr(0, 8);
  for (int p = 0; p < options_.parts; ++p)
    tmp_parts_.push_back(dir + "/.tmp-" + Manifest::PartName(old_.parts + p) + "-" + id);
  TESSERA_RETURN_IF_ERROR(OpenParts(tmp_parts_));
  manifest_ = old_;
  manifest_.chunks.clear();
  return Status::OK();
}

Status DatasetWriter::CommitAppend(const nlohmann::json& meta) {
  // The new records must read like the old ones (image shape, csv columns, ...).
  if (!old_.meta.empty() && meta != old_.meta) {
    return Status::InvalidArgument("the appended records do not match data set '" + name_ + "': it has " +
                                   old_.meta.dump() + ", they have " + meta.dump() + "; nothing was stored");
  }
  const std::string dir = store_ + "/" + name_;
  // Chunks went round-robin: parts past the number of chunks are empty (a small append would
  // otherwise leave --parts files behind each time).
  const size_t used = std::min(tmp_parts_.size(), manifest_.chunks.size());
  for (size_t p = used; p < tmp_parts_.size(); ++p) (void)RemoveAll(tmp_parts_[p]);
  tmp_parts_.resize(used);
  for (size_t p = 0; p < tmp_parts_.size(); ++p) {
    std::error_code ec;
    fs::rename(tmp_parts_[p], dir + "/" + Manifest::PartName(old_.parts + static_cast<int>(p)), ec);
    if (ec) return Status::Unavailable("cannot move an appended part into place: " + ec.message());
  }
  TESSERA_RETURN_IF_ERROR(FsyncPath(dir));
  Manifest m = old_;
  for (auto c : manifest_.chunks) {
    c.part += old_.parts;
    m.chunks.push_back(c);
  }
  m.parts = old_.parts + static_cast<int>(used);
  m.records = old_.records + records_;
  m.bytes = old_.bytes + bytes_;
  TESSERA_RETURN_IF_ERROR(m.Validate(dir + "/manifest.json"));
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/manifest.json", m.ToJson()));
  committed_ = true;
  return Status::OK();
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
  if (options_.append) return CommitAppend(meta);
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
                          (names.empty()
                               ? std::string("it holds no data sets; make one with `tessera upload`")
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
