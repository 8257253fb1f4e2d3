// The REST API's data set routes: uploads in chunks, data sets, previews, shares.
#include "common/clock.h"
#include "server/api_routes.h"
#include "server/api_server.h"
#include "server/jobs.h"
#include "server_store/json_body.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

Json UploadJson(const UploadInfo& u) {
  Json files = Json::object();
  for (const auto& f : u.files) {
    files[f.name] = {{"size", f.size}, {"received", f.received}};
    if (!f.sha256.empty()) files[f.name]["sha256"] = f.sha256;
  }
  Json j = {{"id", u.id},
            {"namespace", u.ns},
            {"name", u.name},
            {"format", u.format},
            {"state", u.state},
            {"files", files},
            {"chunk_bytes", kMaxUploadChunk},
            {"created_ms", u.created_ms}};
  if (!u.error.empty()) j["error"] = u.error;
  return j;
}

Json DatasetJson(const DatasetInfo& d) {
  Json j = {
      {"namespace", d.ns},          {"name", d.name},    {"format", d.format}, {"record_type", d.record_type},
      {"records", d.records},       {"bytes", d.bytes},  {"chunks", d.chunks}, {"owner", d.owner},
      {"created_ms", d.created_ms}, {"shared", d.shared}};
  if (!d.shared) j["shared_with"] = d.shared_with;
  return j;
}

const std::string kUploadId = "([0-9a-f-]{36})";

// The data set a request names: its path's, or with ?owner=NS, the one NS shared.
std::string DatasetName(const httplib::Request& req) {
  const std::string owner = req.get_param_value("owner");
  return owner.empty() ? std::string(req.matches[2]) : owner + "/" + std::string(req.matches[2]);
}

// The upload, when its namespace allows the caller to upload.
struct UploadOf {
  ApiRoutes& r;
  Datasets* ds;
  StatusOr<UploadInfo> operator()(const User& u, const std::string& id) const {
    TESSERA_ASSIGN_OR_RETURN(UploadInfo up, ds->GetUpload(id));
    Status st = r.Need(u, up.ns, Action::kUploadDataset);
    if (st.code() == StatusCode::kNotFound) return Status::NotFound("no upload '" + id + "'");
    TESSERA_RETURN_IF_ERROR(st);
    return up;
  }
};

const std::string kNamespacePath = std::string("/api/v1/namespaces/") + kNamePattern;

// An upload's declaration (POST .../uploads): its data set's name and format, its files with
// their sizes (and digests), and how to read them.
StatusOr<UploadSpec> UploadSpecOf(const std::string& ns, const std::string& body) {
  TESSERA_ASSIGN_OR_RETURN(
      auto b, JsonBody::Parse(body, {"name", "format", "files", "label_column", "header", "list"}));
  UploadSpec spec;
  spec.ns = ns;
  TESSERA_ASSIGN_OR_RETURN(spec.name, b.String("name"));
  TESSERA_ASSIGN_OR_RETURN(spec.format, b.String("format"));
  TESSERA_ASSIGN_OR_RETURN(auto files, b.OptionalObject("files", {}));
  if (!files)
    return Status::InvalidArgument("body: field 'files' is required, e.g. {\"input\": {\"size\": 1234}}");
  for (const auto& name : files->Keys()) {
    TESSERA_ASSIGN_OR_RETURN(auto f, files->OptionalObject(name, {"size", "sha256"}));
    TESSERA_ASSIGN_OR_RETURN(auto size, f->OptionalInt("size"));
    if (!size) return Status::InvalidArgument("body.files." + name + ": field 'size' is required");
    TESSERA_ASSIGN_OR_RETURN(auto sha, f->OptionalString("sha256"));
    spec.files.push_back({name, *size, sha.value_or(""), 0});
  }
  TESSERA_ASSIGN_OR_RETURN(auto label, b.OptionalString("label_column"));
  TESSERA_ASSIGN_OR_RETURN(auto header, b.OptionalBool("header"));
  TESSERA_ASSIGN_OR_RETURN(auto list, b.OptionalString("list"));
  spec.label_column = label.value_or("0");
  spec.header = header.value_or(false);
  spec.list = list.value_or("list.txt");
  return spec;
}

// Uploads: started (against the namespace's storage quota), listed, read, sent in chunks,
// finished (the data set is made from them) or aborted.
void AddUploadRoutes(ApiRoutes& r, Datasets* ds, Jobs* jobs) {
  const UploadOf upload_of{r, ds};
  r.Post(kNamespacePath + "/uploads", "start upload",
         [&r, ds, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           const std::string ns = req.matches[1];
           TESSERA_RETURN_IF_ERROR(r.Need(u, ns, Action::kUploadDataset));
           TESSERA_ASSIGN_OR_RETURN(UploadSpec spec, UploadSpecOf(ns, req.body));
           // The namespace's storage quota counts its data sets, its uploads under way, its job
           // directories and this upload's declared size (checked and reserved by CreateUpload).
           TESSERA_ASSIGN_OR_RETURN(QuotaLimits q, jobs->Quota(ns));
           if (q.storage_mb) {
             spec.storage_limit_bytes = *q.storage_mb << 20;
             TESSERA_ASSIGN_OR_RETURN(spec.job_bytes, jobs->JobDiskBytes(ns));
           }
           TESSERA_ASSIGN_OR_RETURN(UploadInfo up, ds->CreateUpload(spec, u.id, WallMillis()));
           return Reply{201, UploadJson(up)};
         });
  r.Get(kNamespacePath + "/uploads", "list uploads",
        [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          const std::string ns = req.matches[1];
          TESSERA_RETURN_IF_ERROR(r.Need(u, ns, Action::kUploadDataset));
          TESSERA_ASSIGN_OR_RETURN(auto list, ds->ListUploads(ns));
          Json out = Json::array();
          for (const auto& up : list) out.push_back(UploadJson(up));
          return Reply{200, {{"uploads", out}}};
        });
  r.Get("/api/v1/uploads/" + kUploadId, "read upload",
        [upload_of](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(UploadInfo up, upload_of(u, req.matches[1]));
          return Reply{200, UploadJson(up)};
        });
  r.Put("/api/v1/uploads/" + kUploadId + "/files/([a-z]{1,16})", "upload chunk",
        [upload_of, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(UploadInfo up, upload_of(u, req.matches[1]));
          const std::string off = req.get_param_value("offset");
          char* end = nullptr;
          const long long offset = std::strtoll(off.c_str(), &end, 10);
          if (off.empty() || *end != '\0' || offset < 0)
            return Status::InvalidArgument("give the chunk's offset in the file: ?offset=N");
          TESSERA_ASSIGN_OR_RETURN(int64_t received, ds->PutChunk(up.id, req.matches[2], offset, req.body,
                                                                  req.get_header_value("X-Chunk-SHA256")));
          return Reply{200, {{"file", std::string(req.matches[2])}, {"received", received}}};
        });
  r.Post("/api/v1/uploads/" + kUploadId + "/finish", "finish upload",
         [upload_of, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           TESSERA_ASSIGN_OR_RETURN(UploadInfo up, upload_of(u, req.matches[1]));
           TESSERA_ASSIGN_OR_RETURN(up, ds->Finish(up.id));
           return Reply{202, UploadJson(up)};
         });
  r.Delete("/api/v1/uploads/" + kUploadId, "abort upload",
           [upload_of, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_ASSIGN_OR_RETURN(UploadInfo up, upload_of(u, req.matches[1]));
             TESSERA_RETURN_IF_ERROR(ds->Abort(up.id));
             return Reply{204, {}};
           });
}

// The data sets: listed, read, previewed, deleted, shared with another namespace or not.
void AddStoredDatasetRoutes(ApiRoutes& r, Datasets* ds) {
  r.Get(kNamespacePath + "/datasets", "list data sets",
        [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kListDatasets));
          TESSERA_ASSIGN_OR_RETURN(auto list, ds->List(req.matches[1]));
          Json out = Json::array();
          for (const auto& d : list) out.push_back(DatasetJson(d));
          return Reply{200, {{"datasets", out}}};
        });
  const std::string ds_path = kNamespacePath + "/datasets/" + kObjectPattern;
  r.Get(ds_path, "read data set", [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
    TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kReadDataset));
    TESSERA_ASSIGN_OR_RETURN(DatasetInfo d, ds->Get(req.matches[1], DatasetName(req)));
    return Reply{200, DatasetJson(d)};
  });
  r.Get(ds_path + "/preview", "preview data set",
        [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kReadDataset));
          int n = 10;
          if (req.has_param("n")) {
            const std::string v = req.get_param_value("n");
            char* end = nullptr;
            long x = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || x < 1 || x > 100)
              return Status::InvalidArgument("n: a number of records, 1 to 100");
            n = static_cast<int>(x);
          }
          TESSERA_ASSIGN_OR_RETURN(Json records, ds->Preview(req.matches[1], DatasetName(req), n));
          return Reply{200, {{"records", records}}};
        });
  r.Delete(ds_path, "delete data set",
           [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kDeleteDataset));
             TESSERA_RETURN_IF_ERROR(ds->Delete(req.matches[1], req.matches[2]));
             return Reply{204, {}};
           });
  r.Put(ds_path + "/shares/" + kNamePattern, "share data set",
        [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kShareDataset));
          TESSERA_RETURN_IF_ERROR(ds->Share(req.matches[1], req.matches[2], req.matches[3], true));
          return Reply{204, {}};
        });
  r.Delete(ds_path + "/shares/" + kNamePattern, "unshare data set",
           [&r, ds](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kShareDataset));
             TESSERA_RETURN_IF_ERROR(ds->Share(req.matches[1], req.matches[2], req.matches[3], false));
             return Reply{204, {}};
           });
}

}  // namespace

void AddDatasetRoutes(ApiRoutes& r, Datasets* ds, Jobs* jobs) {
  AddUploadRoutes(r, ds, jobs);
  AddStoredDatasetRoutes(r, ds);
}

}  // namespace tessera::server
