// Datasets: the platform's data sets and the uploads that make them (docs/platform-api.md).
//
// An upload is declared first (name, format, its files with sizes and, optionally, SHA-256
// digests), then each file is sent in chunks of at most 4 MiB, each chunk at the offset the
// server has (a chunk at another offset is refused with the offset to resume from) and with its
// SHA-256 (a chunk that does not match is refused, nothing stored). The bytes received are
// fsynced before they are counted, so a dropped connection or a server crash loses at most the
// chunk in flight, and an upload resumes from `received`. Finishing an upload queues its import:
// a worker converts the files with the importers of `tessera upload` into a data set under
// <data-dir>/datasets/<namespace>/<name> (written to a hidden directory, then renamed), and only
// then records the data set; a half-finished upload or import never appears as a data set. An
// import under way when the server stopped is started again when it starts.
//
// A data set can be shared read-only with other namespaces, previewed (its first records
// decoded), and deleted. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server_store/database.h"

namespace tessera::server {

struct UploadFile {
  std::string name;  // "input", or "images" and "labels" (idx), or "archive" (list)
  int64_t size = 0;
  std::string sha256;  // of the whole file; "" when not given
  int64_t received = 0;
};

struct UploadSpec {
  std::string ns, name, format;
  std::vector<UploadFile> files;
  std::string label_column = "0";  // csv
  bool header = false;             // csv
  std::string list = "list.txt";   // list: the list file's path inside the archive
  // The namespace's storage quota (nullopt: none), and what it has in job directories: the
  // upload is refused unless its declared size fits beside its data sets, the uploads under way
  // and those directories. The declared size is reserved from then on.
  std::optional<int64_t> storage_limit_bytes;
  int64_t job_bytes = 0;
};

struct UploadInfo {
  std::string id, ns, name, format, state, error, owner_id;
  std::vector<UploadFile> files;
  int64_t created_ms = 0;
};

struct DatasetInfo {
  std::string ns, name, format, record_type, owner;
  int64_t records = 0, bytes = 0, chunks = 0, created_ms = 0;
  std::vector<std::string> shared_with;
  bool shared = false;  // reached through a share (owned by another namespace)
};

// Largest chunk accepted, and largest declared file.
inline constexpr int64_t kMaxUploadChunk = int64_t{4} << 20;
inline constexpr int64_t kMaxUploadFile = int64_t{256} << 30;

class Datasets {
 public:
  Datasets(Database* db, std::string data_dir);
  // What uploads must leave free on the server's disk (default 1 GiB).
  void set_keep_free_bytes(int64_t bytes) { keep_free_bytes_ = bytes; }
  ~Datasets();

  // Creates the directories, clears what a crash left (hidden .tmp directories) and restarts
  // imports under way; then runs the import worker.
  Status Start();
  void Stop();

  // The files a format needs, in order ("input"; "images", "labels"; "archive").
  static StatusOr<std::vector<std::string>> FilesOf(const std::string& format);

  // Refused (ResourceExhausted, saying what is used) over the namespace's storage quota, or when
  // the server's disk would keep less than `keep_free_bytes` once the upload and its import are
  // written. Declarations are checked one at a time: several at once cannot pass the quota together.
  StatusOr<UploadInfo> CreateUpload(const UploadSpec& spec, const std::string& owner_id, int64_t now_ms);
  StatusOr<UploadInfo> GetUpload(const std::string& id);
  // Appends `bytes` to file `file` at `offset`; returns the bytes received so far.
  StatusOr<int64_t> PutChunk(const std::string& id, const std::string& file, int64_t offset,
                             const std::string& bytes, const std::string& sha256_hex);
  // Every file complete (and matching its digest): queues the import.
  StatusOr<UploadInfo> Finish(const std::string& id);
  Status Abort(const std::string& id);
  // A namespace's uploads not yet imported (receiving, importing, failed), newest first.
  StatusOr<std::vector<UploadInfo>> ListUploads(const std::string& ns);

  // The data sets a namespace has: its own and those shared with it.
  StatusOr<std::vector<DatasetInfo>> List(const std::string& ns);
  // A data set as `ns` sees it (its own, or shared with it).
  StatusOr<DatasetInfo> Get(const std::string& ns, const std::string& name);
  // The first `n` records, decoded.
  StatusOr<nlohmann::json> Preview(const std::string& ns, const std::string& name, int n);
  Status Delete(const std::string& ns, const std::string& name);
  Status Share(const std::string& ns, const std::string& name, const std::string& with, bool share);
  // The directory a data set's files are in (its store is the parent), for jobs.
  StatusOr<std::string> StoreOf(const std::string& ns, const std::string& name);
  // Bytes of data sets a namespace owns.
  StatusOr<int64_t> BytesOwned(const std::string& ns);
  // Bytes declared by the namespace's uploads under way (receiving or importing).
  StatusOr<int64_t> BytesReserved(const std::string& ns);
  // The directory of namespace `ns`'s data sets (the store its jobs read).
  std::string StoreDir(const std::string& ns) const { return Store(ns); }

  // Waits until no import is queued or running (tests), up to `timeout_ms`.
  bool WaitIdle(int64_t timeout_ms);

 private:
  void Worker();
  Status Import(const UploadInfo& u);
  std::string UploadDir(const std::string& id) const { return data_dir_ + "/uploads/" + id; }
  std::string Store(const std::string& ns) const { return data_dir_ + "/datasets/" + ns; }

  Database* db_;
  std::string data_dir_;
  std::mutex chunk_mu_;  // one chunk written at a time (a chunk is at most 4 MiB)
  std::mutex reserve_mu_;  // one upload declared at a time (its check and its record)
  int64_t keep_free_bytes_ = int64_t{1} << 30;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;  // uploads to import
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace tessera::server
