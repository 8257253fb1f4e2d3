// The job commands of a tessera server's command line: `tessera jobs` (the list, or one job),
// `tessera metrics`, `tessera logs`, `tessera stop`, `tessera scale` and `tessera delete`
// (`tessera quota` is with the administration commands, cmd_admin.cc).
#include <cstdio>

#include "cli/commands.h"
#include "cli/remote_flags.h"
#include "cli/remote_jobs.h"
#include "cli/signals.h"
#include "common/clock.h"
#include "common/strings.h"

namespace tessera::cli {
namespace {

using remote::Json;

struct JobsFlags {
  RemoteFlags remote;
  std::string id;
  std::string node;
  std::string state;
  int limit = 30;
  int tail = 100;
  bool follow = false;
  bool list = false;
  int trainers = 0;
  std::vector<std::string> ids;
};

int64_t Ms(const Json& v) { return v.is_number() ? v.get<int64_t>() : 0; }

Status ListJobs(Remote& r, const JobsFlags& f) {
  std::string q = "?limit=" + std::to_string(f.limit);
  if (!f.state.empty()) q += "&state=" + f.state;
  TESSERA_ASSIGN_OR_RETURN(Json list, r.api->Get("/api/v1/namespaces/" + r.ns + "/jobs" + q));
  if (f.remote.json) {
    std::printf("%s\n", list.dump(2).c_str());
    return Status::OK();
  }
  const int64_t now = WallMillis();
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "TRAINERS", "WHAT", "SUBMITTED", "REASON"}};
  for (const auto& j : list["jobs"]) {
    const Json& spec = j["spec"];
    std::string what = spec.contains("model") ? spec["model"].get<std::string>() : spec.value("command", "");
    if (what.size() > 28) what = what.substr(0, 25) + "...";
    std::string reason = j.value("reason", "");
    reason = reason.substr(0, reason.find('\n'));  // the first line; `tessera jobs ID` has all
    if (reason.size() > 60) reason = reason.substr(0, 57) + "...";
    rows.push_back({j.value("id", ""), j.value("state", ""),
                    std::to_string(j.value("trainers", 0)) + "/" + std::to_string(spec.value("trainers", 0)),
                    what, Ago(Ms(j["submitted_ms"]), now), reason});
  }
  if (rows.size() == 1) {
    std::printf("no jobs in %s yet: `tessera submit --help` says how to start one\n", r.ns.c_str());
    return Status::OK();
  }
  std::fputs(Table(rows).c_str(), stdout);
  return Status::OK();
}

Status ShowJob(Remote& r, const JobsFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(Json j, r.api->Get("/api/v1/jobs/" + f.id));
  if (f.remote.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return Status::OK();
  }
  const Json& spec = j["spec"];
  std::printf("job        %s (%s, namespace %s, by %s)\n", j.value("id", "").c_str(),
              j.value("name", "").c_str(), j.value("namespace", "").c_str(), j.value("owner", "").c_str());
  std::printf("state      %s%s\n", j.value("state", "").c_str(),
              j.value("reason", "").empty() ? "" : (": " + j.value("reason", "")).c_str());
  std::printf("runs       %s on %s%s\n",
              spec.contains("model") ? ("model " + spec["model"].get<std::string>()).c_str()
                                     : ("`" + spec.value("command", "") + "`").c_str(),
              spec.value("dataset", "").c_str(),
              spec.contains("eval_dataset")
                  ? (", evaluated on " + spec["eval_dataset"].get<std::string>()).c_str()
                  : "");
  std::printf("shape      %d pservers, %d trainers now (%d..%d), %s, %s, %d passes, priority %s\n",
              spec.value("pservers", 0), j.value("trainers", 0), spec.value("trainers_min", 0),
              spec.value("trainers", 0), spec.value("mode", "").c_str(), spec.value("optimizer", "").c_str(),
              spec.value("passes", 0), JsonValueText(spec["priority"]).c_str());
  std::printf("times      submitted %s, started %s, ended %s\n", LocalTime(Ms(j["submitted_ms"])).c_str(),
              LocalTime(Ms(j["started_ms"])).c_str(), LocalTime(Ms(j["ended_ms"])).c_str());
  const Json& result = j["result"];
  if (result.is_object() && result.contains("metrics") && result["metrics"].is_object() &&
      !result["metrics"].empty())
    std::printf("result     %s\n", result["metrics"].dump().c_str());
  const Json& workers = j["workers"];
  if (workers.is_object() && workers.contains("status") && workers["status"].is_object()) {
    const Json& st = workers["status"];
    std::printf(
        "progress   pass %s of %s, step %s, %s samples (%s/s), tasks %s of %s done, %s failed\n",
        JsonValueText(st.value("pass", Json(0)).is_number() ? Json(st["pass"].get<int64_t>() + 1) : Json())
            .c_str(),
        JsonValueText(st.value("passes", Json())).c_str(), JsonValueText(st.value("step", Json())).c_str(),
        JsonValueText(st.value("samples", Json())).c_str(),
        JsonValueText(st.value("samplesPerSecond", Json())).c_str(),
        JsonValueText(st.value("done", Json())).c_str(), JsonValueText(st.value("tasks", Json())).c_str(),
        JsonValueText(st.value("failed", Json())).c_str());
  }
  if (workers.is_object() && workers.contains("nodes") && workers["nodes"].is_array()) {
    std::vector<std::string> nodes;
    for (const auto& n : workers["nodes"])
      nodes.push_back(
          n.value("kind", "") + "-" + n.value("name", "") + " " + n.value("state", "") +
          (n.value("restarts", 0) > 0 ? " (" + std::to_string(n.value("restarts", 0)) + " restarts)" : ""));
    std::printf("workers    %s\n", Join(nodes, ", ").c_str());
  }
  std::printf("events\n");
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : j.value("events", Json::array()))
    rows.push_back({"  " + LocalTime(Ms(e["time_ms"])), e.value("state", ""), e.value("reason", "")});
  std::fputs(Table(rows).c_str(), stdout);
  return Status::OK();
}

Status Metrics(Remote& r, const JobsFlags& f) {
  Json all = Json::array();
  int64_t since = 0;
  for (int page = 0; page < 10000; ++page) {
    TESSERA_ASSIGN_OR_RETURN(Json m,
                             r.api->Get("/api/v1/jobs/" + f.id + "/metrics?since=" + std::to_string(since)));
    for (auto& p : m["points"]) all.push_back(std::move(p));
    since = m.value("next", since);
    if (!m.value("more", false)) break;
  }
  if (f.remote.json) {
    std::printf("%s\n", Json{{"points", all}}.dump(2).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {{"TIME", "PASS", "STEP", "WHAT", "VALUE", "BY"}};
  for (const auto& p : all) {
    const bool cost = p.value("type", "") == "cost";
    rows.push_back({LocalTime(Ms(p["time_ms"])), JsonValueText(p["pass"]), JsonValueText(p["step"]),
                    cost ? "cost" : p.value("metric", "eval"), JsonValueText(cost ? p["cost"] : p["value"]),
                    cost ? "trainer-" + p.value("trainer", "?") : "evaluation"});
  }
  if (rows.size() == 1) {
    std::printf("job %s has reported no cost or evaluation yet\n", f.id.c_str());
    return Status::OK();
  }
  std::fputs(Table(rows).c_str(), stdout);
  return Status::OK();
}

Status Logs(Remote& r, const JobsFlags& f, const std::atomic<bool>& interrupted) {
  if (f.list) {
    TESSERA_ASSIGN_OR_RETURN(Json logs, r.api->Get("/api/v1/jobs/" + f.id + "/logs"));
    std::vector<std::vector<std::string>> rows = {{"LOG", "SIZE"}};
    for (const auto& l : logs["logs"])
      rows.push_back({l.value("node", ""), HumanBytes(static_cast<double>(l.value("bytes", int64_t{0})))});
    std::fputs(Table(rows).c_str(), stdout);
    return Status::OK();
  }
  if (f.follow) return FollowLog(*r.api, f.id, f.node, f.tail, interrupted);
  const std::string path = "/api/v1/jobs/" + f.id + "/logs/" + f.node;
  if (f.tail > 0) {
    TESSERA_ASSIGN_OR_RETURN(Json t, r.api->Get(path + "?tail=" + std::to_string(f.tail)));
    std::fputs(t.value("text", "").c_str(), stdout);
    return Status::OK();
  }
  // The whole log, read in the server's pieces (at most 256 KiB each).
  int64_t offset = 0;
  for (int piece = 0; piece < 1000000 && !interrupted; ++piece) {
    TESSERA_ASSIGN_OR_RETURN(Json t, r.api->Get(path + "?offset=" + std::to_string(offset)));
    const std::string text = t.value("text", "");
    if (text.empty()) break;
    std::fwrite(text.data(), 1, text.size(), stdout);
    offset = t.value("next", offset + static_cast<int64_t>(text.size()));
  }
  return Status::OK();
}

void AddJobArg(CLI::App* cmd, JobsFlags* f) { cmd->add_option("job", f->id, "the job's id")->required(); }

// `tessera jobs`.
void RegisterJobs(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobsFlags>();
  auto* cmd =
      app.add_subcommand("jobs",
                         "List the jobs of your namespace on a tessera server, newest first; with a job's\n"
                         "id, show that job: its state and why, its shape, times, workers and events.");
  AddRemoteFlags(cmd, &f->remote);
  cmd->add_option("job", f->id, "one job's id");
  cmd->add_option("--state", f->state, "only jobs in this state")
      ->check(CLI::IsMember({"queued", "starting", "running", "succeeded", "failed", "stopped"}));
  cmd->add_option("--limit", f->limit, "at most this many")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->callback([f, exit_code] {
    *exit_code = WithRemote("jobs", f->remote,
                            [&](Remote& r) { return f->id.empty() ? ListJobs(r, *f) : ShowJob(r, *f); });
  });
}

// `tessera metrics`.
void RegisterMetrics(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobsFlags>();
  auto* cmd =
      app.add_subcommand("metrics", "Print a job's cost and evaluation history (kept after it ends).");
  AddRemoteFlags(cmd, &f->remote);
  AddJobArg(cmd, f.get());
  cmd->callback([f, exit_code] {
    *exit_code = WithRemote("metrics", f->remote, [&](Remote& r) { return Metrics(r, *f); });
  });
}

// `tessera logs`.
void RegisterLogs(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobsFlags>();
  auto* cmd = app.add_subcommand(
      "logs",
      "Print a job's log: the supervisor's (the job's story) unless you name another: master-0,\n"
      "pserver-N, trainer-N (your code's output), etcd. Logs are kept after the job ends.");
  AddRemoteFlags(cmd, &f->remote, false);
  AddJobArg(cmd, f.get());
  cmd->add_option("node", f->node, "which log")->capture_default_str();
  f->node = "supervisor";
  cmd->add_flag("-f,--follow", f->follow,
                "keep printing as the log grows, until the job ends (Ctrl-C stops)");
  cmd->add_option("--tail", f->tail, "print the last N lines first (0: the whole log)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_flag("--list", f->list, "list the job's logs and their sizes");
  cmd->callback([f, exit_code] {
    std::atomic<bool> interrupted{false};
    remote::ApiClient* live = nullptr;
    SignalWatcher signals([&](int) {
      interrupted = true;
      if (live) live->Cancel();
    });
    *exit_code = WithRemote("logs", f->remote, [&](Remote& r) {
      live = r.api.get();
      Status s = Logs(r, *f, interrupted);
      return s.code() == StatusCode::kCancelled ? Status::OK() : s;
    });
  });
}

// `tessera stop`.
void RegisterStop(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobsFlags>();
  auto* cmd = app.add_subcommand("stop", "Stop jobs (a queued job at once; a running one within 30 s).");
  AddRemoteFlags(cmd, &f->remote, false);
  cmd->add_option("jobs", f->ids, "the jobs' ids")->required();
  cmd->callback([f, exit_code] {
    *exit_code = WithRemote("stop", f->remote, [&](Remote& r) -> Status {
      for (const auto& id : f->ids) {
        TESSERA_ASSIGN_OR_RETURN(Json j, r.api->Post("/api/v1/jobs/" + id + "/stop"));
        std::printf("job %s: stopping (%s)\n", id.c_str(), j.value("state", "").c_str());
      }
      return Status::OK();
    });
  });
}

// `tessera scale`.
void RegisterScale(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobsFlags>();
  auto* cmd =
      app.add_subcommand("scale",
                         "Change the number of trainers of a job: fewer at once, more when the server has\n"
                         "room (see `tessera jobs JOB` for why it waits).");
  AddRemoteFlags(cmd, &f->remote, false);
  AddJobArg(cmd, f.get());
  cmd->add_option("trainers", f->trainers, "the number of trainers")->required()->check(CLI::Range(1, 256));
  cmd->callback([f, exit_code] {
    *exit_code = WithRemote("scale", f->remote, [&](Remote& r) -> Status {
      TESSERA_ASSIGN_OR_RETURN(Json j,
                               r.api->Post("/api/v1/jobs/" + f->id + "/scale", {{"trainers", f->trainers}}));
      std::printf("job %s: scaling to %d trainers (%d now)\n", f->id.c_str(), f->trainers,
                  j.value("trainers", 0));
      return Status::OK();
    });
  });
}

// `tessera delete`.
void RegisterDelete(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<JobsFlags>();
  auto* cmd = app.add_subcommand("delete", "Delete ended jobs: their history, logs and files.");
  AddRemoteFlags(cmd, &f->remote, false);
  cmd->add_option("jobs", f->ids, "the jobs' ids")->required();
  cmd->callback([f, exit_code] {
    *exit_code = WithRemote("delete", f->remote, [&](Remote& r) -> Status {
      for (const auto& id : f->ids) {
        TESSERA_RETURN_IF_ERROR(r.api->Delete("/api/v1/jobs/" + id).status());
        std::printf("job %s deleted\n", id.c_str());
      }
      return Status::OK();
    });
  });
}

}  // namespace

void RegisterRemoteJobs(CLI::App& app, int* exit_code) {
  RegisterJobs(app, exit_code);
  RegisterMetrics(app, exit_code);
  RegisterLogs(app, exit_code);
  RegisterStop(app, exit_code);
  RegisterScale(app, exit_code);
  RegisterDelete(app, exit_code);
}

}  // namespace tessera::cli
