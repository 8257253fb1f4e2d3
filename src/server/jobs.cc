// The platform's jobs: submission, the list, history reads, stop, scale, delete, quotas (see jobs.h); the
// monitor that runs them: jobs_monitor.cc.
#include "server/jobs.h"

#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/clock.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/random.h"
#include "common/strings.h"
#include "server_store/archive.h"
#include "server_store/json_body.h"
#include "tessera/params.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool Terminal(const std::string& s) { return s == "succeeded" || s == "failed" || s == "stopped"; }

constexpr const char* kJobColumns =
    "j.id, j.namespace, j.name, u.name, j.spec, j.state, j.reason, j.trainers, j.submitted_ms, j.started_ms, "
    "j.ended_ms, j.workers, j.result, j.backend";

JobInfo JobFromRow(const Row& r) {
  JobInfo j;
  j.id = r.Text(0);
  j.ns = r.Text(1);
  j.name = r.Text(2);
  j.owner = r.Text(3);
  j.spec = Submission::FromJson(ParseJsonOr(r.Text(4), Json::object()));
  j.state = r.Text(5);
  j.reason = r.Text(6);
  j.trainers = static_cast<int>(r.Int(7));
  j.submitted_ms = r.Int(8);
  j.started_ms = r.Int(9);
  j.ended_ms = r.Int(10);
  j.workers = ParseJsonOr(r.Text(11), Json::object());
  j.result = ParseJsonOr(r.Text(12), Json::object());
  j.backend = r.Text(13);
  return j;
}

SchedJob SchedOf(const JobInfo& j) {
  SchedJob s;
  s.id = j.id;
  s.ns = j.ns;
  s.priority = j.spec.priority;
  s.submitted_ms = j.submitted_ms;
  s.running = j.state == "starting" || j.state == "running";
  s.pservers = j.spec.training.pservers;
  s.trainers = j.trainers;
  s.min_trainers = j.spec.training.trainers_min;
  s.max_trainers = j.spec.training.trainers_max;
  s.per_process = j.spec.resources;
  return s;
}

}  // namespace

Jobs::Jobs(Database* db, Datasets* datasets, std::unique_ptr<Backend> backend, JobsOptions options)
    : db_(db), datasets_(datasets), backend_(std::move(backend)), o_(std::move(options)) {}

Jobs::~Jobs() { Stop(); }

Status Jobs::Start() {
  std::error_code ec;
  for (const char* sub : {"jobs", "packages"}) {
    fs::create_directories(o_.data_dir + "/" + sub, ec);
    if (ec) return Status::Unavailable("cannot create " + o_.data_dir + "/" + sub + ": " + ec.message());
  }
  TESSERA_ASSIGN_OR_RETURN(auto running,
                           db_->Query("SELECT COUNT(*) FROM jobs WHERE state IN ('starting', 'running')"));
  if (!running.empty() && running[0].Int(0) > 0)
    spdlog::info("server: re-attaching to {} job(s) started before", running[0].Int(0));
  TESSERA_ASSIGN_OR_RETURN(auto last, db_->Query("SELECT COALESCE(MAX(submitted_ms), 0) FROM jobs"));
  stop_ = false;
  last_submitted_ms_ = last.empty() ? 0 : last[0].Int(0);
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void Jobs::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Jobs::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    Tick(WallMillis());
    l.lock();
    cv_.wait_for(l, std::chrono::milliseconds(o_.tick_ms), [&] { return stop_; });
  }
}

StatusOr<Json> Jobs::PutPackage(const std::string& ns, const std::string& digest, const std::string& bytes) {
  const std::string got = Sha256Hex(bytes);
  if (got != digest)
    return Status::DataLoss("the package does not match the SHA-256 in its address (got " + got +
                            "); nothing stored");
  const std::string path = o_.data_dir + "/packages/" + digest;
  const std::string tmp = path + ".tmp-" + NewUuid().substr(0, 8);
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(tmp, bytes));
  auto sum = CheckArchive(tmp, ArchiveLimits{int64_t{256} << 20, 20000});
  if (!sum.ok()) {
    (void)RemoveAll(tmp);
    return sum.status();
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    (void)RemoveAll(tmp);
    return Status::Unavailable("cannot store the package: " + ec.message());
  }
  Status st = db_->Exec(
      "INSERT INTO packages (namespace, digest, bytes, files, created_ms) VALUES (?, ?, ?, ?, ?)",
      {ns, digest, static_cast<int64_t>(bytes.size()), static_cast<int64_t>(sum->files), WallMillis()});
  if (!st.ok() && st.code() != StatusCode::kAlreadyExists) return st;
  return Json{{"digest", digest}, {"bytes", bytes.size()}, {"files", sum->paths}};
}

StatusOr<JobInfo> Jobs::Submit(const std::string& ns, const std::string& owner_id, const Submission& spec,
                               int64_t now_ms) {
  const spec::JobSpec& t = spec.training;
  TESSERA_ASSIGN_OR_RETURN(DatasetInfo ds, datasets_->Get(ns, t.dataset));
  if (!t.eval_dataset.empty()) {
    TESSERA_ASSIGN_OR_RETURN(DatasetInfo ev, datasets_->Get(ns, t.eval_dataset));
    if (ev.ns != ds.ns)
      return Status::InvalidArgument("eval_dataset: it must be in the same namespace as the data set ('" +
                                     ds.ns + "')");
  }
  if (!spec.package.empty()) {
    TESSERA_ASSIGN_OR_RETURN(
        auto pk, db_->Query("SELECT 1 FROM packages WHERE namespace = ? AND digest = ?", {ns, spec.package}));
    if (pk.empty())
      return Status::NotFound("no code package " + spec.package + " in '" + ns +
                              "': upload it first (PUT .../packages/" + spec.package + ")");
  }
  // A job that could never run is refused now, whatever the setting.
  SchedJob me;
  me.ns = ns;
  me.pservers = t.pservers;
  me.per_process = spec.resources;
  const Usage alone = server::UsageOf(me, t.trainers_min);
  TESSERA_ASSIGN_OR_RETURN(QuotaLimits q, Quota(ns));
  if (std::string over = OverQuota(alone, q); !over.empty())
    return Status::ResourceExhausted("the job alone exceeds the quota of '" + ns + "': it would use " + over);
  if (std::string shortage = Short(alone.resources, o_.capacity); !shortage.empty())
    return Status::ResourceExhausted("the job can never run here: it " + shortage + " on the whole server");
  if (o_.refuse_over_quota) {
    TESSERA_ASSIGN_OR_RETURN(Usage used, UsageOf(ns));
    Usage with = used;
    with.jobs += alone.jobs;
    with.trainers += alone.trainers;
    with.pservers += alone.pservers;
    with.resources.cpu += alone.resources.cpu;
    with.resources.memory_mb += alone.resources.memory_mb;
    with.resources.gpus += alone.resources.gpus;
    if (std::string over = OverQuota(with, q); !over.empty())
      return Status::ResourceExhausted("over the quota of '" + ns + "': with this job it would use " + over);
  }
  {
    // Submission times are strictly increasing, so two jobs submitted in one millisecond are
    // still taken in the order they came (the scheduler orders by priority, then this time).
    std::lock_guard<std::mutex> l(mu_);
    now_ms = std::max(now_ms, last_submitted_ms_ + 1);
    last_submitted_ms_ = now_ms;
  }
  JobInfo j;
  j.id = ns + "-" + NewUuid().substr(0, 8);
  j.ns = ns;
  j.name = t.name.empty() ? (t.model.empty() ? "code" : t.model) + "-" + ds.name : t.name;
  j.spec = spec;
  j.state = "queued";
  j.reason = "waiting to be scheduled";
  j.submitted_ms = now_ms;
  TESSERA_RETURN_IF_ERROR(db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("INSERT INTO jobs (id, namespace, name, owner_id, spec, state, reason, priority, "
                 "dataset_ns, dataset, trainers, "
                 "submitted_ms, backend, handle, workers, result, metrics_next, stop_requested) VALUES (?, "
                 "?, ?, ?, ?, ?, ?, ?, "
                 "?, ?, 0, ?, ?, '', '{}', '{}', 0, 0)",
                 {j.id, ns, j.name, owner_id, spec.ToJson().dump(), j.state, j.reason, spec.priority, ds.ns,
                  ds.name, now_ms, backend_->Name()}));
    return sql.Exec("INSERT INTO job_events (id, job_id, time_ms, state, reason) VALUES (?, ?, ?, ?, ?)",
                    {NewUuid(), j.id, now_ms, j.state, std::string("submitted")});
  }));
  cv_.notify_all();
  return Get(j.id);
}

StatusOr<std::vector<JobInfo>> Jobs::List(const std::string& ns, const std::string& state, int limit) {
  std::string sql = std::string("SELECT ") + kJobColumns +
                    " FROM jobs j JOIN users u ON u.id = j.owner_id WHERE j.namespace = ?";
  std::vector<Value> params = {ns};
  if (!state.empty()) {
    sql += " AND j.state = ?";
    params.push_back(state);
  }
  sql += " ORDER BY j.submitted_ms DESC, j.id LIMIT ?";
  params.push_back(static_cast<int64_t>(limit));
  TESSERA_ASSIGN_OR_RETURN(auto rows, db_->Query(sql, params));
  std::vector<JobInfo> out;
  for (const auto& r : rows) out.push_back(JobFromRow(r));
  return out;
}

StatusOr<JobInfo> Jobs::Get(const std::string& id) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query(std::string("SELECT ") + kJobColumns +
                                          " FROM jobs j JOIN users u ON u.id = j.owner_id WHERE j.id = ?",
                                      {id}));
  if (rows.empty()) return Status::NotFound("no job '" + id + "'");
  return JobFromRow(rows[0]);
}

StatusOr<Json> Jobs::Events(const std::string& id) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query("SELECT time_ms, state, reason FROM job_events WHERE job_id = ? "
                                      "ORDER BY time_ms, id",
                                      {id}));
  Json out = Json::array();
  for (const auto& r : rows)
    out.push_back({{"time_ms", r.Int(0)}, {"state", r.Text(1)}, {"reason", r.Text(2)}});
  return out;
}

StatusOr<Json> Jobs::Metrics(const std::string& id, int64_t since, int limit) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query("SELECT seq, point FROM job_metrics WHERE job_id = ? AND seq > ? "
                                      "ORDER BY seq LIMIT ?",
                                      {id, since, static_cast<int64_t>(limit)}));
  Json points = Json::array();
  int64_t next = since;
  for (const auto& r : rows) {
    points.push_back(ParseJsonOr(r.Text(1), Json::object()));
    next = r.Int(0);
  }
  return Json{{"points", points}, {"next", next}, {"more", static_cast<int>(rows.size()) >= limit}};
}

Status Jobs::Transition(const std::string& id, const std::string& from, const std::string& to,
                        const std::string& reason, int64_t now_ms) {
  return db_->InTransaction([&](Sql& sql) -> Status {
    std::string set = "UPDATE jobs SET state = ?, reason = ?";
    if (to == "starting") set += ", started_ms = " + std::to_string(now_ms);
    if (Terminal(to)) set += ", ended_ms = " + std::to_string(now_ms);
    TESSERA_RETURN_IF_ERROR(sql.Exec(set + " WHERE id = ? AND state = ?", {to, reason, id, from}));
    if (sql.Changes() != 1) return Status::FailedPrecondition("job " + id + " is no longer " + from);
    return sql.Exec("INSERT INTO job_events (id, job_id, time_ms, state, reason) VALUES (?, ?, ?, ?, ?)",
                    {NewUuid(), id, now_ms, to, reason});
  });
}

Status Jobs::RequestStop(const std::string& id, const std::string& by, int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(JobInfo j, Get(id));
  if (Terminal(j.state))
    return Status::FailedPrecondition("job " + id + " has already ended (" + j.state + ")");
  if (j.state == "queued") {
    Status st = Transition(id, "queued", "stopped", "stopped by " + by + " before it started", now_ms);
    if (st.ok() || st.code() != StatusCode::kFailedPrecondition) return st;
    TESSERA_ASSIGN_OR_RETURN(j, Get(id));  // it started meanwhile
  }
  TESSERA_RETURN_IF_ERROR(db_->Exec("UPDATE jobs SET stop_requested = ?, reason = ? WHERE id = ?",
                                    {now_ms, "stopping: requested by " + by, id}));
  TESSERA_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT handle FROM jobs WHERE id = ?", {id}));
  return backend_->Stop(JobDir(id), rows.empty() ? "" : rows[0].Text(0), false);
}

Status Jobs::Scale(const std::string& id, int trainers, int64_t now_ms) {
  TESSERA_RETURN_IF_ERROR(CheckRange("trainers", trainers, 1, 256));
  TESSERA_ASSIGN_OR_RETURN(JobInfo j, Get(id));
  if (Terminal(j.state)) return Status::FailedPrecondition("job " + id + " has ended (" + j.state + ")");
  Submission s = j.spec;
  s.ScaleTo(trainers);
  TESSERA_RETURN_IF_ERROR(db_->Exec("UPDATE jobs SET spec = ? WHERE id = ?", {s.ToJson().dump(), id}));
  if ((j.state == "running" || j.state == "starting") && j.trainers > trainers) {
    TESSERA_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT handle FROM jobs WHERE id = ?", {id}));
    TESSERA_RETURN_IF_ERROR(backend_->Scale(JobDir(id), rows[0].Text(0), trainers));
    TESSERA_RETURN_IF_ERROR(
        db_->Exec("UPDATE jobs SET trainers = ? WHERE id = ?", {static_cast<int64_t>(trainers), id}));
    TESSERA_RETURN_IF_ERROR(db_->Exec(
        "INSERT INTO job_events (id, job_id, time_ms, state, reason) VALUES (?, ?, ?, ?, ?)",
        {NewUuid(), id, now_ms, j.state, "scaled to " + std::to_string(trainers) + " trainers on request"}));
  }
  cv_.notify_all();  // growing is the scheduler's, on its next round
  return Status::OK();
}

Status Jobs::Delete(const std::string& id) {
  TESSERA_ASSIGN_OR_RETURN(JobInfo j, Get(id));
  if (!Terminal(j.state))
    return Status::FailedPrecondition("job " + id + " is " + j.state + ": stop it first");
  TESSERA_RETURN_IF_ERROR(db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(sql.Exec("DELETE FROM job_metrics WHERE job_id = ?", {id}));
    TESSERA_RETURN_IF_ERROR(sql.Exec("DELETE FROM job_events WHERE job_id = ?", {id}));
    return sql.Exec("DELETE FROM jobs WHERE id = ?", {id});
  }));
  return RemoveAll(JobDir(id));
}

std::vector<std::pair<std::string, std::string>> Jobs::Logs(const std::string& id) {
  return backend_->Logs(JobDir(id));
}

StatusOr<uint32_t> Jobs::JobUser(const std::string& ns) {
  // Two tries: a namespace whose user another thread gave meanwhile finds it the second time.
  for (int attempt = 0;; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(auto mine, db_->Query("SELECT uid FROM job_users WHERE namespace = ?", {ns}));
    if (!mine.empty()) return static_cast<uint32_t>(mine[0].Int(0));
    TESSERA_ASSIGN_OR_RETURN(auto all, db_->Query("SELECT uid FROM job_users"));
    std::set<uint32_t> taken;
    for (const auto& r : all) taken.insert(static_cast<uint32_t>(r.Int(0)));
    // An id the host knows (a user or a group of its own) is never a job's.
    auto known = [](uint32_t id) {
      struct passwd pw {};
      struct group gr {};
      passwd* pw_found = nullptr;
      group* gr_found = nullptr;
      char buf[4096];
      ::getpwuid_r(id, &pw, buf, sizeof buf, &pw_found);
      if (pw_found) return true;
      ::getgrgid_r(id, &gr, buf, sizeof buf, &gr_found);
      return gr_found != nullptr;
    };
    TESSERA_ASSIGN_OR_RETURN(uint32_t uid, sandbox::PickUid(o_.job_uids, taken, known));
    Status st =
        db_->Exec("INSERT INTO job_users (namespace, uid) VALUES (?, ?)", {ns, static_cast<int64_t>(uid)});
    if (st.ok()) {
      spdlog::info("server: namespace {} runs its jobs as user {}", ns, uid);
      return uid;
    }
    if (st.code() != StatusCode::kAlreadyExists || attempt > 0) return st;
  }
}

StatusOr<QuotaLimits> Jobs::Quota(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT limits FROM quotas WHERE namespace = ?", {ns}));
  if (rows.empty()) return QuotaLimits{};
  return QuotaFromBody(rows[0].Text(0));
}

Status Jobs::SetQuota(const std::string& ns, const QuotaLimits& q) {
  return db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(sql.Exec("DELETE FROM quotas WHERE namespace = ?", {ns}));
    return sql.Exec("INSERT INTO quotas (namespace, limits, over) VALUES (?, ?, '')",
                    {ns, QuotaJson(q).dump()});
  });
}

StatusOr<Usage> Jobs::UsageOf(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(SchedInput in, SchedulerInput());
  return NamespaceUsage(in, ns);
}

StatusOr<SchedInput> Jobs::SchedulerInput() {
  SchedInput in;
  in.capacity = o_.capacity;
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query(std::string("SELECT ") + kJobColumns +
                                      " FROM jobs j JOIN users u ON u.id = j.owner_id WHERE j.state IN "
                                      "('queued', 'starting', 'running')"));
  for (const auto& r : rows) in.jobs.push_back(SchedOf(JobFromRow(r)));
  TESSERA_ASSIGN_OR_RETURN(auto quotas, db_->Query("SELECT namespace, limits FROM quotas"));
  for (const auto& q : quotas) {
    auto limits = QuotaFromBody(q.Text(1));
    if (limits.ok()) in.quotas[q.Text(0)] = *limits;
  }
  return in;
}

void Jobs::StopAll(int64_t timeout_ms) {
  auto active = [&] {
    auto rows = db_->Query("SELECT id, handle FROM jobs WHERE state IN ('queued', 'starting', 'running')");
    return rows.ok() ? *rows : std::vector<Row>{};
  };
  for (const auto& r : active()) (void)RequestStop(r.Text(0), "the server's shutdown", WallMillis());
  const int64_t deadline = WallMillis() + timeout_ms;
  while (WallMillis() < deadline && !active().empty()) {
    Tick(WallMillis());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (const auto& r : active()) (void)backend_->Stop(JobDir(r.Text(0)), r.Text(1), true);
  Tick(WallMillis());
}

}  // namespace tessera::server
