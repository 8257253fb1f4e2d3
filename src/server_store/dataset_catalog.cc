// The data sets a namespace has (see datasets.h): listed with the ones shared with it, looked up
// with their store, previewed (the first records decoded), deleted (not while a job uses them),
// shared read-only, and counted against the storage quota. Uploads and imports: datasets.cc.
#include <filesystem>

#include "common/files.h"
#include "common/random.h"
#include "dataset/dataset.h"
#include "server_store/datasets.h"
#include "tessera/example.pb.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A record as JSON for a preview: text as text; an Example by its fields (long lists cut).
Json DecodeRecord(const std::string& record_type, std::string_view rec) {
  if (record_type != "example")
    return Json{{"text", std::string(rec.substr(0, 4096))}, {"bytes", rec.size()}};
  data::Example ex;
  if (!ex.ParseFromArray(rec.data(), static_cast<int>(rec.size())))
    return Json{{"error", "not a valid Example"}};
  constexpr int kMax = 32;
  Json j = Json::object();
  if (!ex.label().empty()) j["label"] = ex.label();
  if (ex.label_id() != 0 || !ex.shape().empty()) j["label_id"] = ex.label_id();
  if (!ex.path().empty()) j["path"] = ex.path();
  if (!ex.data().empty()) j["data_bytes"] = ex.data().size();
  if (!ex.shape().empty()) j["shape"] = std::vector<int>(ex.shape().begin(), ex.shape().end());
  auto cut = [kMax](const auto& field) {
    using T = std::decay_t<decltype(*field.begin())>;
    std::vector<T> v(field.begin(), field.begin() + std::min<int>(field.size(), kMax));
    return v;
  };
  if (!ex.values().empty()) j["values"] = cut(ex.values());
  if (!ex.feature_ids().empty()) j["feature_ids"] = cut(ex.feature_ids());
  if (!ex.feature_values().empty()) j["feature_values"] = cut(ex.feature_values());
  if (ex.values().size() > kMax || ex.feature_ids().size() > kMax) j["truncated"] = true;
  return j;
}

}  // namespace

namespace {

DatasetInfo DatasetFromRow(const Row& r) {
  DatasetInfo d;
  d.ns = r.Text(0);
  d.name = r.Text(1);
  d.format = r.Text(2);
  d.record_type = r.Text(3);
  d.records = r.Int(4);
  d.bytes = r.Int(5);
  d.chunks = r.Int(6);
  d.owner = r.Text(7);
  d.created_ms = r.Int(8);
  return d;
}

constexpr const char* kDatasetColumns =
    "d.namespace, d.name, d.format, d.record_type, d.records, d.bytes, d.chunks, u.name, d.created_ms";

}  // namespace

StatusOr<std::vector<DatasetInfo>> Datasets::List(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows,
      db_->Query(std::string("SELECT ") + kDatasetColumns +
                     " FROM datasets d JOIN users u ON u.id = d.owner_id WHERE d.namespace = ? OR EXISTS "
                     "(SELECT 1 FROM dataset_shares s WHERE s.namespace = d.namespace AND s.name = d.name "
                     "AND s.shared_with = ?) ORDER BY d.namespace, d.name",
                 {ns, ns}));
  TESSERA_ASSIGN_OR_RETURN(auto shares,
                           db_->Query("SELECT name, shared_with FROM dataset_shares WHERE namespace = ? "
                                      "ORDER BY shared_with",
                                      {ns}));
  std::vector<DatasetInfo> out;
  for (const auto& r : rows) {
    DatasetInfo d = DatasetFromRow(r);
    d.shared = d.ns != ns;
    if (!d.shared)
      for (const auto& s : shares)
        if (s.Text(0) == d.name) d.shared_with.push_back(s.Text(1));
    out.push_back(std::move(d));
  }
  return out;
}

StatusOr<DatasetInfo> Datasets::Get(const std::string& ns, const std::string& name) {
  // "owner/name" reaches a data set another namespace shared; a bare name is the namespace's own.
  std::string owner_ns = ns, bare = name;
  if (auto slash = name.find('/'); slash != std::string::npos) {
    owner_ns = name.substr(0, slash);
    bare = name.substr(slash + 1);
  }
  TESSERA_ASSIGN_OR_RETURN(auto list, List(ns));
  for (auto& d : list)
    if (d.ns == owner_ns && d.name == bare) return d;
  return Status::NotFound("no data set '" + name + "' in '" + ns + "'");
}

StatusOr<std::string> Datasets::StoreOf(const std::string& ns, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(DatasetInfo d, Get(ns, name));
  return Store(d.ns);
}

StatusOr<nlohmann::json> Datasets::Preview(const std::string& ns, const std::string& name, int n) {
  TESSERA_ASSIGN_OR_RETURN(DatasetInfo d, Get(ns, name));
  TESSERA_ASSIGN_OR_RETURN(auto reader, dataset::DatasetReader::Open(Store(d.ns), d.name));
  Json out = Json::array();
  std::vector<std::string_view> records;
  for (size_t c = 0; c < reader->manifest().chunks.size() && static_cast<int>(out.size()) < n; ++c) {
    TESSERA_RETURN_IF_ERROR(reader->ReadChunk(c, &records));
    for (auto rec : records) {
      if (static_cast<int>(out.size()) >= n) break;
      out.push_back(DecodeRecord(d.record_type, rec));
    }
  }
  return out;
}

Status Datasets::Delete(const std::string& ns, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query("SELECT 1 FROM datasets WHERE namespace = ? AND name = ?", {ns, name}));
  if (rows.empty()) return Status::NotFound("no data set '" + name + "' of '" + ns + "'");
  TESSERA_ASSIGN_OR_RETURN(auto users,
                           db_->Query("SELECT id FROM jobs WHERE dataset_ns = ? AND dataset = ? AND state IN "
                                      "('queued', 'starting', 'running')",
                                      {ns, name}));
  if (!users.empty())
    return Status::FailedPrecondition("data set '" + name + "' is used by job " + users[0].Text(0) +
                                      ", which has not ended");
  const std::string dir = Store(ns) + "/" + name;
  const std::string trash = Store(ns) + "/.trash-" + name + "-" + NewUuid().substr(0, 8);
  std::error_code ec;
  fs::rename(dir, trash, ec);
  if (ec && fs::exists(dir)) return Status::Unavailable("cannot remove '" + dir + "': " + ec.message());
  TESSERA_RETURN_IF_ERROR(db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("DELETE FROM dataset_shares WHERE namespace = ? AND name = ?", {ns, name}));
    return sql.Exec("DELETE FROM datasets WHERE namespace = ? AND name = ?", {ns, name});
  }));
  return RemoveAll(trash);
}

Status Datasets::Share(const std::string& ns, const std::string& name, const std::string& with, bool share) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query("SELECT 1 FROM datasets WHERE namespace = ? AND name = ?", {ns, name}));
  if (rows.empty()) return Status::NotFound("no data set '" + name + "' of '" + ns + "'");
  if (with == ns) return Status::InvalidArgument("a data set is always its own namespace's");
  TESSERA_ASSIGN_OR_RETURN(auto other, db_->Query("SELECT 1 FROM namespaces WHERE name = ?", {with}));
  if (other.empty()) return Status::NotFound("no namespace '" + with + "'");
  if (!share)
    return db_->Exec("DELETE FROM dataset_shares WHERE namespace = ? AND name = ? AND shared_with = ?",
                     {ns, name, with});
  Status st = db_->Exec("INSERT INTO dataset_shares (namespace, name, shared_with) VALUES (?, ?, ?)",
                        {ns, name, with});
  return st.code() == StatusCode::kAlreadyExists ? Status::OK() : st;
}

StatusOr<int64_t> Datasets::BytesReserved(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT COALESCE(SUM(f.size), 0) FROM upload_files f JOIN uploads u ON u.id = "
                            "f.upload_id WHERE u.namespace = ? AND u.state IN ('receiving', 'importing')",
                            {ns}));
  return rows.empty() ? 0 : rows[0].Int(0);
}

StatusOr<int64_t> Datasets::BytesOwned(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT COALESCE(SUM(bytes), 0) FROM datasets WHERE namespace = ?", {ns}));
  return rows.empty() ? 0 : rows[0].Int(0);
}

}  // namespace tessera::server
