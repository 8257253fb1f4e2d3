// The platform's uploads and their imports (see datasets.h); the data sets themselves: dataset_catalog.cc.
#include "server_store/datasets.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/clock.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/random.h"
#include "common/strings.h"
#include "dataset/dataset.h"
#include "dataset/formats.h"
#include "server_store/archive.h"
#include "tessera/example.pb.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool IsHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

UploadInfo UploadFromRow(const Row& r) {
  UploadInfo u;
  u.id = r.Text(0);
  u.ns = r.Text(1);
  u.name = r.Text(2);
  u.format = r.Text(3);
  u.state = r.Text(4);
  u.error = r.Text(5);
  u.owner_id = r.Text(6);
  u.created_ms = r.Int(7);
  return u;
}

constexpr const char* kUploadColumns =
    "id, namespace, name, format, state, error, owner_id, created_ms, options";

}  // namespace

Datasets::Datasets(Database* db, std::string data_dir) : db_(db), data_dir_(std::move(data_dir)) {}

Datasets::~Datasets() { Stop(); }

StatusOr<std::vector<std::string>> Datasets::FilesOf(const std::string& format) {
  if (format == "text" || format == "csv" || format == "libsvm") return std::vector<std::string>{"input"};
  if (format == "idx") return std::vector<std::string>{"images", "labels"};
  if (format == "list") return std::vector<std::string>{"archive"};
  return Status::InvalidArgument("format '" + format + "' is unknown (known: text, csv, libsvm, idx, list)");
}

Status Datasets::Start() {
  std::error_code ec;
  for (const char* sub : {"uploads", "datasets"}) {
    fs::create_directories(data_dir_ + "/" + sub, ec);
    if (ec) return Status::Unavailable("cannot create " + data_dir_ + "/" + sub + ": " + ec.message());
  }
  // A crash during an import leaves a hidden directory in the store; the import starts again.
  for (const auto& ns_dir : fs::directory_iterator(data_dir_ + "/datasets", ec)) {
    for (const auto& d : fs::directory_iterator(ns_dir.path(), ec)) {
      const std::string n = d.path().filename().string();
      if (n.rfind(".tmp-", 0) == 0 || n.rfind(".trash-", 0) == 0) (void)RemoveAll(d.path().string());
    }
  }
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT id FROM uploads WHERE state = 'importing' ORDER BY created_ms"));
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = false;
    for (const auto& r : rows) queue_.push_back(r.Text(0));
  }
  if (!rows.empty())
    spdlog::info("server: {} data set import(s) under way when the server stopped start again", rows.size());
  worker_ = std::thread([this] { Worker(); });
  return Status::OK();
}

void Datasets::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

StatusOr<UploadInfo> Datasets::CreateUpload(const UploadSpec& spec, const std::string& owner_id,
                                            int64_t now_ms) {
  TESSERA_RETURN_IF_ERROR(ValidateName(spec.name, "data set"));
  TESSERA_ASSIGN_OR_RETURN(auto needed, FilesOf(spec.format));
  for (const auto& f : spec.files) {
    bool known = false;
    for (const auto& n : needed) known = known || n == f.name;
    if (!known)
      return Status::InvalidArgument("files: '" + f.name + "' is not a file of format " + spec.format +
                                     " (it takes " + Join(needed, ", ") + ")");
    if (f.size < 0 || f.size > kMaxUploadFile)
      return Status::InvalidArgument("files." + f.name + ": size " + std::to_string(f.size) +
                                     " is out of range");
    if (!f.sha256.empty() && !IsHexDigest(f.sha256))
      return Status::InvalidArgument("files." + f.name + ": sha256 must be 64 lowercase hex digits");
  }
  for (const auto& n : needed) {
    bool given = false;
    for (const auto& f : spec.files) given = given || f.name == n;
    if (!given) return Status::InvalidArgument("files: format " + spec.format + " needs '" + n + "'");
  }
  if (spec.format == "list") TESSERA_RETURN_IF_ERROR(SafeRelativePath(spec.list).status());
  UploadInfo u;
  u.id = NewUuid();
  u.ns = spec.ns;
  u.name = spec.name;
  u.format = spec.format;
  u.state = "receiving";
  u.owner_id = owner_id;
  u.files = spec.files;
  u.created_ms = now_ms;
  Json options = {{"label_column", spec.label_column}, {"header", spec.header}, {"list", spec.list}};
  int64_t declared = 0;
  for (const auto& f : spec.files) declared += f.size;
  std::lock_guard<std::mutex> reserving(reserve_mu_);
  if (spec.storage_limit_bytes) {
    TESSERA_ASSIGN_OR_RETURN(int64_t owned, BytesOwned(spec.ns));
    TESSERA_ASSIGN_OR_RETURN(int64_t reserved, BytesReserved(spec.ns));
    if (owned + reserved + spec.job_bytes + declared > *spec.storage_limit_bytes)
      return Status::ResourceExhausted(
          "over the storage quota of '" + spec.ns + "' (" +
          HumanBytes(static_cast<double>(*spec.storage_limit_bytes)) + "): its data sets hold " +
          HumanBytes(static_cast<double>(owned)) + ", its job directories " +
          HumanBytes(static_cast<double>(spec.job_bytes)) + ", its uploads under way " +
          HumanBytes(static_cast<double>(reserved)) + ", and this upload is " +
          HumanBytes(static_cast<double>(declared)));
  }
  // The upload, then its import, are on the disk at once: about twice what it declares.
  struct statvfs disk {};
  if (::statvfs(data_dir_.c_str(), &disk) == 0) {
    const int64_t free = static_cast<int64_t>(disk.f_bavail) * static_cast<int64_t>(disk.f_frsize);
    if (free - 2 * declared < keep_free_bytes_)
      return Status::ResourceExhausted(
          "the server's disk has " + std::to_string(free >> 20) + " MB free: this upload of " +
          std::to_string(declared >> 20) +
          " MB (and its import, about as much again) would leave less than the " +
          std::to_string(keep_free_bytes_ >> 20) + " MB it keeps free");
  }
  Status st = db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto have, sql.Query("SELECT 1 FROM datasets WHERE namespace = ? AND name = ?",
                                                  {spec.ns, spec.name}));
    if (!have.empty())
      return Status::AlreadyExists("data set '" + spec.name + "' exists in '" + spec.ns + "'");
    TESSERA_ASSIGN_OR_RETURN(auto busy,
                             sql.Query("SELECT id FROM uploads WHERE namespace = ? AND name = ? AND "
                                       "state IN ('receiving', 'importing')",
                                       {spec.ns, spec.name}));
    if (!busy.empty())
      return Status::AlreadyExists("an upload of '" + spec.name + "' is under way (upload " +
                                   busy[0].Text(0) + "): resume it or abort it");
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("INSERT INTO uploads (id, namespace, name, format, options, state, error, owner_id, "
                 "created_ms) VALUES (?, ?, ?, ?, ?, 'receiving', '', ?, ?)",
                 {u.id, u.ns, u.name, u.format, options.dump(), owner_id, now_ms}));
    for (const auto& f : spec.files) {
      TESSERA_RETURN_IF_ERROR(
          sql.Exec("INSERT INTO upload_files (upload_id, file, size, sha256, received) "
                   "VALUES (?, ?, ?, ?, 0)",
                   {u.id, f.name, f.size, f.sha256}));
    }
    return Status::OK();
  });
  TESSERA_RETURN_IF_ERROR(st);
  std::error_code ec;
  fs::create_directories(UploadDir(u.id), ec);
  if (ec) return Status::Unavailable("cannot create the upload's directory: " + ec.message());
  return u;
}

StatusOr<UploadInfo> Datasets::GetUpload(const std::string& id) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query(std::string("SELECT ") + kUploadColumns + " FROM uploads WHERE id = ?", {id}));
  if (rows.empty()) return Status::NotFound("no upload '" + id + "'");
  UploadInfo u = UploadFromRow(rows[0]);
  TESSERA_ASSIGN_OR_RETURN(auto files,
                           db_->Query("SELECT file, size, sha256, received FROM upload_files WHERE "
                                      "upload_id = ? ORDER BY file",
                                      {id}));
  for (const auto& f : files) u.files.push_back({f.Text(0), f.Int(1), f.Text(2), f.Int(3)});
  return u;
}

StatusOr<int64_t> Datasets::PutChunk(const std::string& id, const std::string& file, int64_t offset,
                                     const std::string& bytes, const std::string& sha256_hex) {
  if (!IsHexDigest(sha256_hex))
    return Status::InvalidArgument("give the chunk's SHA-256 (64 lowercase hex digits) in X-Chunk-SHA256");
  if (static_cast<int64_t>(bytes.size()) > kMaxUploadChunk)
    return Status::InvalidArgument("a chunk is at most " + std::to_string(kMaxUploadChunk) + " bytes");
  const std::string got = Sha256Hex(bytes);
  if (got != sha256_hex)
    return Status::DataLoss("chunk at offset " + std::to_string(offset) + " of '" + file +
                            "' does not match its SHA-256 (got " + got +
                            "); nothing was stored: send it again");
  std::lock_guard<std::mutex> l(chunk_mu_);
  TESSERA_ASSIGN_OR_RETURN(UploadInfo u, GetUpload(id));
  if (u.state != "receiving")
    return Status::FailedPrecondition("upload " + id + " is " + u.state + ", not receiving");
  const UploadFile* f = nullptr;
  for (const auto& x : u.files) f = x.name == file ? &x : f;
  if (!f) return Status::NotFound("upload " + id + " has no file '" + file + "'");
  if (offset != f->received)
    return Status::FailedPrecondition("chunk at offset " + std::to_string(offset) + " of '" + file +
                                      "': the server has " + std::to_string(f->received) +
                                      " bytes; resume from there");
  if (offset + static_cast<int64_t>(bytes.size()) > f->size)
    return Status::InvalidArgument("chunk goes past the declared size of '" + file + "' (" +
                                   std::to_string(f->size) + " bytes)");
  const std::string path = UploadDir(id) + "/" + file;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot open '" + path + "': " + std::strerror(errno));
  // Bytes past `received` are from a chunk whose write was not counted (a crash): dropped.
  bool ok = ::ftruncate(fd, offset) == 0 &&
            ::pwrite(fd, bytes.data(), bytes.size(), offset) == static_cast<ssize_t>(bytes.size()) &&
            ::fdatasync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return Status::Unavailable("cannot write '" + path + "': " + std::strerror(err));
  const int64_t received = offset + static_cast<int64_t>(bytes.size());
  TESSERA_RETURN_IF_ERROR(db_->Exec("UPDATE upload_files SET received = ? WHERE upload_id = ? AND file = ?",
                                    {received, id, file}));
  return received;
}

StatusOr<UploadInfo> Datasets::Finish(const std::string& id) {
  {
    std::lock_guard<std::mutex> l(chunk_mu_);
    TESSERA_ASSIGN_OR_RETURN(UploadInfo u, GetUpload(id));
    if (u.state != "receiving")
      return Status::FailedPrecondition("upload " + id + " is " + u.state + ", not receiving");
    for (const auto& f : u.files) {
      if (f.received != f.size)
        return Status::FailedPrecondition("file '" + f.name + "' has " + std::to_string(f.received) + " of " +
                                          std::to_string(f.size) + " bytes; send the rest first");
      if (f.sha256.empty()) continue;
      TESSERA_ASSIGN_OR_RETURN(std::string digest, Sha256File(UploadDir(id) + "/" + f.name));
      if (digest != f.sha256)
        return Status::DataLoss("file '" + f.name + "' does not match its declared SHA-256 (got " + digest +
                                "); abort the upload and send it again");
    }
    TESSERA_RETURN_IF_ERROR(db_->Exec("UPDATE uploads SET state = 'importing' WHERE id = ?", {id}));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(id);
  }
  cv_.notify_all();
  return GetUpload(id);
}

Status Datasets::Abort(const std::string& id) {
  std::lock_guard<std::mutex> l(chunk_mu_);
  TESSERA_ASSIGN_OR_RETURN(UploadInfo u, GetUpload(id));
  if (u.state == "importing") return Status::FailedPrecondition("upload " + id + " is being imported");
  TESSERA_RETURN_IF_ERROR(db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(sql.Exec("DELETE FROM upload_files WHERE upload_id = ?", {id}));
    return sql.Exec("DELETE FROM uploads WHERE id = ?", {id});
  }));
  return RemoveAll(UploadDir(id));
}

StatusOr<std::vector<UploadInfo>> Datasets::ListUploads(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query("SELECT id FROM uploads WHERE namespace = ? AND state <> 'done' "
                                      "ORDER BY created_ms DESC LIMIT 200",
                                      {ns}));
  std::vector<UploadInfo> out;
  for (const auto& r : rows) {
    TESSERA_ASSIGN_OR_RETURN(UploadInfo u, GetUpload(r.Text(0)));
    out.push_back(std::move(u));
  }
  return out;
}

void Datasets::Worker() {
  for (;;) {
    std::string id;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      id = queue_.front();
      queue_.pop_front();
      busy_ = true;
    }
    auto u = GetUpload(id);
    Status st = u.ok() ? Import(*u) : u.status();
    if (u.ok()) {
      if (st.ok()) {
        spdlog::info("server: data set '{}/{}' imported", u->ns, u->name);
      } else {
        spdlog::warn("server: import of '{}/{}' failed: {}", u->ns, u->name, st.message());
        (void)db_->Exec("UPDATE uploads SET state = 'failed', error = ? WHERE id = ?",
                        {std::string(st.message()), id});
        (void)RemoveAll(UploadDir(id));
      }
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

Status Datasets::Import(const UploadInfo& u) {
  TESSERA_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT options FROM uploads WHERE id = ?", {u.id}));
  if (rows.empty()) return Status::NotFound("upload " + u.id + " is gone");
  Json options = Json::parse(rows[0].Text(0), nullptr, false);
  const std::string dir = UploadDir(u.id);
  dataset::ImportOptions io;
  io.format = u.format;
  if (u.format == "idx") {
    io.images = dir + "/images";
    io.labels = dir + "/labels";
  } else if (u.format == "list") {
    TESSERA_ASSIGN_OR_RETURN(std::string list, SafeRelativePath(options.value("list", "list.txt")));
    (void)RemoveAll(dir + "/files");
    TESSERA_RETURN_IF_ERROR(ExtractArchive(dir + "/archive", dir + "/files", ArchiveLimits{}).status());
    io.input = dir + "/files/" + list;
    if (!fs::is_regular_file(io.input))
      return Status::InvalidArgument("the archive has no list file '" + list +
                                     "' (set \"list\" to its path)");
  } else {
    io.input = dir + "/input";
  }
  io.label_column = options.value("label_column", "0");
  io.header = options.value("header", false);
  TESSERA_ASSIGN_OR_RETURN(std::string record_type, dataset::RecordTypeFor(u.format));
  const std::string store = Store(u.ns);
  std::error_code ec;
  fs::create_directories(store, ec);
  // A data set directory without a record is what a crash between the rename and the record
  // left: this import makes it again.
  if (fs::exists(store + "/" + u.name, ec)) (void)RemoveAll(store + "/" + u.name);
  TESSERA_ASSIGN_OR_RETURN(auto writer,
                           dataset::DatasetWriter::Create(store, u.name, u.format, record_type, {}));
  Json meta;
  TESSERA_RETURN_IF_ERROR(dataset::Import(
      io, [&](std::string_view rec) { return writer->Add(rec); }, &meta, [](int64_t, int64_t, int64_t) {}));
  if (writer->records() == 0) return Status::InvalidArgument("the upload holds no records");
  TESSERA_RETURN_IF_ERROR(writer->Commit(meta));
  TESSERA_ASSIGN_OR_RETURN(auto manifest, dataset::LoadManifest(store + "/" + u.name));
  Status st = db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("INSERT INTO datasets (namespace, name, format, record_type, records, bytes, chunks, "
                 "owner_id, created_ms) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 {u.ns, u.name, u.format, record_type, writer->records(), writer->bytes_written(),
                  static_cast<int64_t>(manifest.chunks.size()), u.owner_id, WallMillis()}));
    return sql.Exec("UPDATE uploads SET state = 'done' WHERE id = ?", {u.id});
  });
  if (!st.ok()) {
    (void)RemoveAll(store + "/" + u.name);
    return st;
  }
  (void)RemoveAll(dir);
  return Status::OK();
}

bool Datasets::WaitIdle(int64_t timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return queue_.empty() && !busy_; });
}

}  // namespace tessera::server
