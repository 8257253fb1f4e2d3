// A data set's upload in chunks, resumable (see upload.h).
#include "remote/upload.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "common/digest.h"
#include "common/strings.h"

namespace tessera::remote {
namespace {

using Clock = std::chrono::steady_clock;

struct LocalFile {
  std::string role, path, sha256;
  int64_t size = 0;
};

void Pause(double seconds, const std::atomic<bool>& cancel) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (!cancel && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// The unfinished upload of `name` in the namespace, if there is one.
StatusOr<Json> PendingUpload(ApiClient& api, const DatasetUpload& up) {
  TESSERA_ASSIGN_OR_RETURN(Json list, api.Get("/api/v1/namespaces/" + up.ns + "/uploads"));
  for (const auto& u : list.value("uploads", Json::array()))
    if (u.value("name", "") == up.name && u.value("state", "") != "failed") return u;
  return Json();
}

bool SameFiles(const Json& upload, const std::vector<LocalFile>& files) {
  if (!upload.contains("files") || upload["files"].size() != files.size()) return false;
  for (const auto& f : files) {
    if (!upload["files"].contains(f.role)) return false;
    const Json& s = upload["files"][f.role];
    if (s.value("size", int64_t{-1}) != f.size || s.value("sha256", "") != f.sha256) return false;
  }
  return true;
}

int64_t Received(const Json& upload) {
  int64_t n = 0;
  const Json files = upload.value("files", Json::object());
  for (const auto& [_, f] : files.items()) n += f.value("received", int64_t{0});
  return n;
}

// Sends one file from what the server has to its end.
Status SendFile(ApiClient& api, const std::string& id, const LocalFile& f, int64_t chunk,
                const DatasetUpload& up, int64_t* sent_total, int64_t total, const UploadEvents& events,
                const std::atomic<bool>& cancel) {
  std::ifstream in(f.path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read " + f.path);
  TESSERA_ASSIGN_OR_RETURN(Json state, api.Get("/api/v1/uploads/" + id));
  int64_t offset = state["files"][f.role].value("received", int64_t{0});
  const int64_t before = *sent_total;
  std::string buf;
  int failures = 0;
  const auto start = Clock::now();
  int64_t sent_here = 0;
  while (offset < f.size) {
    if (cancel) return Status::Cancelled("upload interrupted");
    const int64_t n = std::min(chunk, f.size - offset);
    buf.resize(static_cast<size_t>(n));
    in.clear();
    in.seekg(offset);
    if (!in.read(buf.data(), n)) return Status::Aborted(f.path + " became shorter while it was uploaded");
    auto r = api.PutBytes("/api/v1/uploads/" + id + "/files/" + f.role + "?offset=" + std::to_string(offset),
                          buf, {{"X-Chunk-SHA256", Sha256Hex(buf)}});
    if (!r.ok()) {
      // Another writer or a lost answer: the server says where it stands; carry on from there.
      const bool retry = r.status().code() == StatusCode::kUnavailable ||
                         r.status().code() == StatusCode::kFailedPrecondition ||
                         r.status().code() == StatusCode::kInternal;
      if (!retry || ++failures > 8) return r.status();
      if (events.note) events.note("retrying after: " + r.status().message());
      Pause(std::min(8, 1 << (failures - 1)) * 0.5, cancel);
      auto now = api.Get("/api/v1/uploads/" + id);
      if (!now.ok()) continue;
      offset = (*now)["files"][f.role].value("received", int64_t{0});
      *sent_total = before + offset;
      continue;
    }
    failures = 0;
    offset = r->value("received", offset + n);
    sent_here += n;
    *sent_total = before + offset;
    if (events.progress) events.progress(*sent_total, total);
    if (up.limit_bytes_per_s > 0) {
      const double due = static_cast<double>(sent_here) / up.limit_bytes_per_s;
      const double spent = std::chrono::duration<double>(Clock::now() - start).count();
      if (due > spent) Pause(due - spent, cancel);
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<Json> UploadDataset(ApiClient& api, const DatasetUpload& up, const UploadEvents& events,
                             const std::atomic<bool>& cancel) {
  std::vector<LocalFile> files;
  int64_t total = 0;
  for (const auto& [role, path] : up.files) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return Status::InvalidArgument(path + " is not a file that can be read");
    if (events.note && st.st_size > (64 << 20)) events.note("computing the SHA-256 of " + path);
    TESSERA_ASSIGN_OR_RETURN(std::string sha, Sha256File(path));
    files.push_back({role, path, sha, static_cast<int64_t>(st.st_size)});
    total += st.st_size;
  }
  TESSERA_ASSIGN_OR_RETURN(Json upload, PendingUpload(api, up));
  if (!upload.is_null()) {
    if (!SameFiles(upload, files))
      return Status::AlreadyExists("an unfinished upload of '" + up.name +
                                   "' with other files is on the server (upload " + upload.value("id", "") +
                                   "); `tessera datasets rm " + up.name + "` removes it");
    if (events.note)
      events.note("resuming upload " + upload.value("id", "") + ": the server has " +
                  HumanBytes(static_cast<double>(Received(upload))) + " of " +
                  HumanBytes(static_cast<double>(total)));
  } else {
    Json body = {{"name", up.name}, {"format", up.format}, {"files", Json::object()}};
    for (const auto& f : files) body["files"][f.role] = {{"size", f.size}, {"sha256", f.sha256}};
    if (!up.label_column.empty()) body["label_column"] = up.label_column;
    if (up.header) body["header"] = true;
    if (!up.list.empty()) body["list"] = up.list;
    TESSERA_ASSIGN_OR_RETURN(upload, api.Post("/api/v1/namespaces/" + up.ns + "/uploads", body));
  }
  const std::string id = upload.value("id", "");
  if (upload.value("state", "") == "receiving") {
    int64_t chunk = up.chunk_bytes > 0 ? up.chunk_bytes : upload.value("chunk_bytes", int64_t{4} << 20);
    chunk = std::min(chunk, upload.value("chunk_bytes", chunk));
    int64_t sent = 0;
    for (const auto& f : files)
      TESSERA_RETURN_IF_ERROR(SendFile(api, id, f, chunk, up, &sent, total, events, cancel));
    TESSERA_ASSIGN_OR_RETURN(upload, api.Post("/api/v1/uploads/" + id + "/finish"));
  }
  // The import runs on the server; an upload's record goes once it is done.
  const auto deadline = Clock::now() + std::chrono::hours(6);
  std::string state = upload.value("state", "");
  while (state == "importing") {
    if (cancel) return Status::Cancelled("stopped waiting; the server goes on importing '" + up.name + "'");
    if (Clock::now() > deadline)
      return Status::DeadlineExceeded("the import of '" + up.name + "' takes over 6 hours");
    if (events.importing) events.importing(state);
    Pause(0.3, cancel);
    auto now = api.Get("/api/v1/uploads/" + id);
    if (!now.ok()) {
      if (now.status().code() == StatusCode::kNotFound) break;  // done: the record is gone
      return now.status();
    }
    upload = *now;
    state = upload.value("state", "");
  }
  if (state == "failed")
    return Status::InvalidArgument("the server could not import '" + up.name +
                                   "': " + upload.value("error", "?"));
  return api.Get("/api/v1/namespaces/" + up.ns + "/datasets/" + up.name);
}

}  // namespace tessera::remote
