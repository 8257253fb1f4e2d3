// The jobs' monitor (see jobs.h): each round observes the running jobs through the backend,
// copies their run history (cost, evaluation, workers) into the database, ends the ones that
// ended, then runs the scheduler and carries out its decisions (start, resize, wait).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/files.h"
#include "common/random.h"
#include "server_store/archive.h"
#include "server/jobs.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The smallest limit on a sandboxed job's files: its etcd writes 64 MiB log files.
constexpr int64_t kMinFileLimit = int64_t{256} << 20;

}  // namespace

void Jobs::Tick(int64_t now_ms) {
  std::lock_guard<std::mutex> l(tick_mu_);
  MeasureDisks(now_ms);
  ObserveRunning(now_ms);
  ScheduleRound(now_ms);
}

void Jobs::ObserveRunning(int64_t now_ms) {
  auto rows = db_->Query(
      "SELECT id, state, handle, metrics_next, stop_requested FROM jobs WHERE state IN ('starting', "
      "'running')");
  if (!rows.ok()) return;
  for (const auto& r : *rows) {
    const std::string id = r.Text(0), state = r.Text(1), handle = r.Text(2);
    const int64_t stop_ms = r.Int(4);
    JobObservation o = backend_->Observe(JobDir(id), handle);
    if (o.alive) {
      if (state == "starting" && o.ready)
        (void)Transition(id, "starting", "running", "every process started; its master answers", now_ms);
      ReadHistory(id, r.Int(3));
      // Past a limit the kernel enforces, the job has failed: what is left of it is stopped now,
      // and the next round records why.
      if (!o.limit_hit.empty()) {
        spdlog::warn("server: job {} failed: {}; stopping it", id, o.limit_hit);
        (void)backend_->Stop(JobDir(id), handle, true);
        continue;
      }
      // A stop not done within 30 s is forced.
      if (stop_ms > 0 && now_ms - stop_ms > 30000) (void)backend_->Stop(JobDir(id), handle, true);
      continue;
    }
    ReadHistory(id, r.Int(3));  // the last lines the master wrote
    const auto files = Files(id);
    if (o.completed) {
      auto result = files.Read(kResultFile, 1 << 20);
      if (result.ok())
        (void)db_->Exec("UPDATE jobs SET result = ? WHERE id = ?",
                        {ParseJsonOr(*result, Json::object()).dump(), id});
      (void)Transition(id, state, "succeeded", "every pass done; the model was saved", now_ms);
    } else if (!o.limit_hit.empty()) {
      (void)Transition(id, state, "failed", o.limit_hit, now_ms);
    } else if (auto over = storage_stops_.find(id); over != storage_stops_.end()) {
      (void)Transition(id, state, "failed", over->second, now_ms);
    } else if (stop_ms > 0) {
      (void)Transition(id, state, "stopped", "stopped on request", now_ms);
    } else {
      std::string why = o.why_ended;
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      (void)Transition(id, state, "failed", "its processes ended before every pass was done: " + why, now_ms);
    }
    storage_stops_.erase(id);
    Ended(id);
  }
}

void Jobs::Ended(const std::string& id) {
  // Its last word on its workers was written while they ran: none of them is alive now.
  auto cur = db_->Query("SELECT workers FROM jobs WHERE id = ?", {id});
  if (cur.ok() && !cur->empty()) {
    Json workers = ParseJsonOr((*cur)[0].Text(0), Json::object());
    if (workers.contains("nodes") && workers["nodes"].is_array()) {
      for (auto& n : workers["nodes"])
        if (n.is_object() && n.value("state", "") == "alive") n["state"] = "ended";
    }
    workers["ended"] = true;
    (void)db_->Exec("UPDATE jobs SET workers = ? WHERE id = ?", {workers.dump(), id});
  }
  (void)db_->Exec("UPDATE jobs SET disk_bytes = ? WHERE id = ?", {backend_->DiskBytes(JobDir(id)), id});
}

StatusOr<int64_t> Jobs::JobDiskBytes(const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT COALESCE(SUM(disk_bytes), 0) FROM jobs WHERE namespace = ?", {ns}));
  return rows.empty() ? 0 : rows[0].Int(0);
}

void Jobs::MeasureDisks(int64_t now_ms) {
  if (now_ms < next_disk_ms_) return;
  next_disk_ms_ = now_ms + 5000;
  auto rows =
      db_->Query("SELECT id, namespace, handle, disk_bytes FROM jobs WHERE state IN ('starting', 'running')");
  if (!rows.ok()) return;
  std::set<std::string> namespaces;
  struct statvfs disk {};
  const bool short_of_disk =
      ::statvfs(o_.data_dir.c_str(), &disk) == 0 &&
      static_cast<int64_t>(disk.f_bavail) * static_cast<int64_t>(disk.f_frsize) < o_.keep_free_bytes;
  for (const auto& r : *rows) {
    const int64_t bytes = backend_->DiskBytes(JobDir(r.Text(0)));
    (void)db_->Exec("UPDATE jobs SET disk_bytes = ? WHERE id = ?", {bytes, r.Text(0)});
    namespaces.insert(r.Text(1));
    // Short of disk: the jobs that are filling it are stopped, whatever their quota.
    if (short_of_disk && bytes > r.Int(3) + (int64_t{16} << 20) && !storage_stops_.count(r.Text(0))) {
      const std::string why = fmt::format(
          "the server's disk is nearly full ({} MB free; it keeps {} MB free) and the job's directory grew "
          "to {} MB",
          (static_cast<int64_t>(disk.f_bavail) * static_cast<int64_t>(disk.f_frsize)) >> 20,
          o_.keep_free_bytes >> 20, bytes >> 20);
      spdlog::warn("server: job {} failed: {}; stopping it", r.Text(0), why);
      storage_stops_[r.Text(0)] = why;
      (void)backend_->Stop(JobDir(r.Text(0)), r.Text(2), true);
    }
  }
  for (const auto& ns : namespaces) {
    auto q = Quota(ns);
    if (!q.ok() || !q->storage_mb) continue;
    auto data = datasets_->BytesOwned(ns);
    auto jobs = JobDiskBytes(ns);
    if (!data.ok() || !jobs.ok()) continue;
    const int64_t used = *data + *jobs, limit = *q->storage_mb << 20;
    if (used <= limit) continue;
    // The namespace is past its storage: its running jobs, which are what grew, are stopped.
    for (const auto& r : *rows) {
      if (r.Text(1) != ns || storage_stops_.count(r.Text(0))) continue;
      const std::string why = fmt::format(
          "its namespace went past its storage quota ({} MB): {} MB of data sets and job directories, this "
          "job's directory {} MB",
          *q->storage_mb, used >> 20, backend_->DiskBytes(JobDir(r.Text(0))) >> 20);
      spdlog::warn("server: job {} failed: {}; stopping it", r.Text(0), why);
      storage_stops_[r.Text(0)] = why;
      (void)backend_->Stop(JobDir(r.Text(0)), r.Text(2), true);
    }
  }
}

void Jobs::ReadHistory(const std::string& id, int64_t next_seq) {
  // The master's run history (master/run_history.h), read on from where the last round stopped,
  // as the job wrote it (through ConfinedDir: the job chooses what that path is).
  const auto files = Files(id);
  int64_t& offset = history_offset_[id];
  const int64_t size = files.Size(kHistoryFile);
  if (size < 0) return;
  if (size < offset) offset = 0;
  if (size == offset) return;
  std::string text = files.ReadRange(kHistoryFile, offset, std::min<int64_t>(size - offset, 64 << 20));
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return;
  offset += static_cast<int64_t>(end + 1);
  Json workers;
  std::vector<Json> points;
  size_t start = 0;
  while (start <= end) {
    const size_t nl = text.find('\n', start);
    Json line = Json::parse(text.begin() + start, text.begin() + nl, nullptr, false);
    start = nl + 1;
    if (line.is_discarded() || !line.is_object()) continue;
    const std::string type = line.value("type", "");
    if ((type == "cost" || type == "eval") && line.value("seq", int64_t{0}) > next_seq) {
      points.push_back(std::move(line));
    } else if (type == "nodes" || type == "status") {
      if (workers.is_null()) workers = Json::object();
      workers[type] = line[type];
      workers[type + "_ms"] = line.value("time_ms", int64_t{0});
    }
  }
  (void)db_->InTransaction([&](Sql& sql) -> Status {
    int64_t last = next_seq;
    for (const auto& p : points) {
      const int64_t seq = p.value("seq", int64_t{0});
      if (seq <= last) continue;  // a new leader's lines start past the last seq, but be sure
      TESSERA_RETURN_IF_ERROR(
          sql.Exec("INSERT INTO job_metrics (job_id, seq, point) VALUES (?, ?, ?)", {id, seq, p.dump()}));
      last = seq;
    }
    if (last != next_seq)
      TESSERA_RETURN_IF_ERROR(sql.Exec("UPDATE jobs SET metrics_next = ? WHERE id = ?", {last, id}));
    if (workers.is_null()) return Status::OK();
    TESSERA_ASSIGN_OR_RETURN(auto cur, sql.Query("SELECT workers FROM jobs WHERE id = ?", {id}));
    Json merged = cur.empty() ? Json::object() : ParseJsonOr(cur[0].Text(0), Json::object());
    merged.update(workers);
    return sql.Exec("UPDATE jobs SET workers = ? WHERE id = ?", {merged.dump(), id});
  });
}

Status Jobs::Launch(const JobInfo& j, int trainers, int64_t now_ms) {
  const std::string dir = JobDir(j.id);
  (void)RemoveAll(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());
  JobLaunch l;
  l.id = j.id;
  l.ns = j.ns;
  l.dir = dir;
  l.job = j.spec.Training(j.id);
  l.whole_spec = j.spec.whole_spec;
  TESSERA_ASSIGN_OR_RETURN(DatasetInfo ds, datasets_->Get(j.ns, l.job.dataset));
  TESSERA_ASSIGN_OR_RETURN(l.store, datasets_->StoreOf(j.ns, l.job.dataset));
  l.job.dataset = ds.name;
  if (!l.job.eval_dataset.empty()) {
    TESSERA_ASSIGN_OR_RETURN(DatasetInfo ev, datasets_->Get(j.ns, l.job.eval_dataset));
    l.job.eval_dataset = ev.name;
  }
  if (!j.spec.package.empty()) {
    l.code_dir = dir + "/code";
    TESSERA_RETURN_IF_ERROR(ExtractArchive(o_.data_dir + "/packages/" + j.spec.package, l.code_dir,
                                           ArchiveLimits{int64_t{256} << 20, 20000})
                                .status());
  }
  l.trainers = trainers;
  l.cpu = j.spec.resources.cpu;
  l.memory_mb = j.spec.resources.memory_mb;
  l.gpus = j.spec.resources.gpus;
  if (o_.sandboxed) {
    TESSERA_ASSIGN_OR_RETURN(l.uid, JobUser(j.ns));
    // What it may read: its namespace's data sets and those shared with it.
    TESSERA_ASSIGN_OR_RETURN(auto visible, datasets_->List(j.ns));
    if (fs::is_directory(datasets_->StoreDir(j.ns))) l.readable.push_back(datasets_->StoreDir(j.ns));
    for (const auto& d : visible)
      if (d.ns != j.ns) l.readable.push_back(datasets_->StoreDir(d.ns) + "/" + d.name);
    // No file may grow past what its namespace's storage quota has left (between two
    // measurements of its directory, one file could take it all), nor below what its etcd needs
    // (64 MiB log files).
    TESSERA_ASSIGN_OR_RETURN(QuotaLimits q, Quota(j.ns));
    if (q.storage_mb) {
      TESSERA_ASSIGN_OR_RETURN(int64_t data, datasets_->BytesOwned(j.ns));
      TESSERA_ASSIGN_OR_RETURN(int64_t jobs, JobDiskBytes(j.ns));
      l.max_file_bytes = std::max<int64_t>(kMinFileLimit, (*q.storage_mb << 20) - data - jobs);
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::string handle, backend_->Start(l));
  (void)now_ms;
  return db_->Exec("UPDATE jobs SET handle = ?, trainers = ? WHERE id = ?",
                   {handle, static_cast<int64_t>(trainers), j.id});
}

void Jobs::ScheduleRound(int64_t now_ms) {
  auto in = SchedulerInput();
  if (!in.ok()) return;
  for (const Decision& d : Schedule(*in)) {
    auto j = Get(d.id);
    if (!j.ok()) continue;
    if (d.kind == Decision::kStart) {
      // Claimed first (queued -> starting), so a stop that came meanwhile wins.
      if (!Transition(d.id, "queued", "starting",
                      "starting with " + std::to_string(d.trainers) + " trainers (" + d.reason + ")", now_ms)
               .ok())
        continue;
      Status st = Launch(*j, d.trainers, now_ms);
      if (!st.ok())
        (void)Transition(d.id, "starting", "failed", "could not start: " + std::string(st.message()), now_ms);
    } else if (d.kind == Decision::kResize) {
      auto h = db_->Query("SELECT handle FROM jobs WHERE id = ?", {d.id});
      if (!h.ok() || h->empty()) continue;
      Status st = backend_->Scale(JobDir(d.id), (*h)[0].Text(0), d.trainers);
      if (!st.ok()) {
        spdlog::warn("server: cannot resize job {}: {}", d.id, st.message());
        continue;
      }
      (void)db_->Exec("UPDATE jobs SET trainers = ? WHERE id = ?", {static_cast<int64_t>(d.trainers), d.id});
      (void)db_->Exec("INSERT INTO job_events (id, job_id, time_ms, state, reason) VALUES (?, ?, ?, ?, ?)",
                      {NewUuid(), d.id, now_ms, j->state, d.reason});
    } else if (j->reason != d.reason) {
      (void)db_->Exec("UPDATE jobs SET reason = ? WHERE id = ? AND state = 'queued'", {d.reason, d.id});
      (void)db_->Exec("INSERT INTO job_events (id, job_id, time_ms, state, reason) VALUES (?, ?, ?, ?, ?)",
                      {NewUuid(), d.id, now_ms, j->state, d.reason});
    }
  }
}

}  // namespace tessera::server
