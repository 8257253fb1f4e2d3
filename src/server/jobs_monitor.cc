// The jobs' monitor (see jobs.h): each round observes the running jobs through the backend,
// copies their run history (cost, evaluation, workers) into the database, ends the ones that
// ended, then runs the scheduler and carries out its decisions (start, resize, wait).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "common/random.h"
#include "server/archive.h"
#include "server/jobs.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

}  // namespace

void Jobs::Tick(int64_t now_ms) {
  std::lock_guard<std::mutex> l(tick_mu_);
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
      // A stop not done within 30 s is forced.
      if (stop_ms > 0 && now_ms - stop_ms > 30000) (void)backend_->Stop(JobDir(id), handle, true);
      continue;
    }
    ReadHistory(id, r.Int(3));  // the last lines the master wrote
    if (o.completed) {
      auto result = ReadFile(JobDir(id) + "/run/result.json");
      if (result.ok())
        (void)db_->Exec("UPDATE jobs SET result = ? WHERE id = ?",
                        {ParseJsonOr(*result, Json::object()).dump(), id});
      (void)Transition(id, state, "succeeded", "every pass done; the model was saved", now_ms);
    } else if (stop_ms > 0) {
      (void)Transition(id, state, "stopped", "stopped on request", now_ms);
    } else {
      std::string why = o.why_ended;
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      (void)Transition(id, state, "failed", "its processes ended before every pass was done: " + why, now_ms);
    }
  }
}

void Jobs::ReadHistory(const std::string& id, int64_t next_seq) {
  // The master's run history (master/run_history.h), read on from where the last round stopped.
  const std::string path = backend_->HistoryPath(JobDir(id));
  int64_t& offset = history_offset_[id];
  std::ifstream f(path, std::ios::binary);
  if (!f) return;
  f.seekg(0, std::ios::end);
  const int64_t size = f.tellg();
  if (size < offset) offset = 0;
  if (size == offset) return;
  f.seekg(offset);
  std::string text(static_cast<size_t>(std::min<int64_t>(size - offset, 64 << 20)), '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
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
  TESSERA_ASSIGN_OR_RETURN(DatasetInfo ds, datasets_->Get(j.ns, j.spec.dataset));
  TESSERA_ASSIGN_OR_RETURN(l.store, datasets_->StoreOf(j.ns, j.spec.dataset));
  l.dataset = ds.name;
  if (!j.spec.eval_dataset.empty()) {
    TESSERA_ASSIGN_OR_RETURN(DatasetInfo ev, datasets_->Get(j.ns, j.spec.eval_dataset));
    l.eval_dataset = ev.name;
  }
  l.model = j.spec.model;
  if (!j.spec.package.empty()) {
    l.code_dir = dir + "/code";
    TESSERA_RETURN_IF_ERROR(ExtractArchive(o_.data_dir + "/packages/" + j.spec.package, l.code_dir,
                                           ArchiveLimits{int64_t{256} << 20, 20000})
                                .status());
    l.command = j.spec.command;
  }
  l.model_args = j.spec.model_args;
  l.mode = j.spec.mode;
  l.optimizer = j.spec.optimizer;
  l.passes = j.spec.passes;
  l.batch_size = j.spec.batch_size;
  l.pservers = j.spec.pservers;
  l.trainers = trainers;
  l.cpu = j.spec.resources.cpu;
  l.memory_mb = j.spec.resources.memory_mb;
  l.gpus = j.spec.resources.gpus;
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
