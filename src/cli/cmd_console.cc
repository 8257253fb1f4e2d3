// `tessera console --run DIR`: the web console of a run that has ended (or of one still going,
// as far as its files tell), from the files `tessera local` keeps in the run directory: the
// history the master wrote as it went (history.jsonl: cost, evaluations, nodes, status) and each
// process's log. Serves until Ctrl-C.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "common/files.h"
#include "common/http_access.h"
#include "master/console_server.h"
#include "master/run_history.h"
#include "security/job_secret.h"

namespace tessera::cli {
namespace {

struct ConsoleFlags {
  std::string run;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string web_dir;
};

int RunConsole(const ConsoleFlags& f) {
  std::atomic<bool> stop{false};
  SignalWatcher signals([&](int) { stop = true; });
  const std::string dir = std::filesystem::absolute(f.run).lexically_normal().string();
  auto history = master::ReadRunHistory(dir + "/history.jsonl");
  if (!history.ok()) {
    return Fail("console", Status::NotFound("'" + dir +
                                            "' holds no run history (history.jsonl): give the run "
                                            "directory of a tessera local run (--run)"));
  }
  auto h = std::make_shared<master::RunHistory>(std::move(*history));
  master::ConsoleSources cs;
  cs.job = h->job;
  cs.config = h->config;
  cs.status = [h]() -> StatusOr<master::StatusReply> {
    if (!h->has_status) return Status::Unavailable("the run's history holds no status of the job yet");
    return h->status;
  };
  cs.cost_since = [h](int64_t since) {
    std::vector<master::CostPoint> out;
    for (const auto& p : h->points) {
      if (p.seq > since) out.push_back(p);
    }
    return out;
  };
  cs.nodes = [h] { return h->nodes; };
  cs.log_dir = dir + "/logs";
  cs.web_dir = master::FindConsolePage(f.web_dir);
  cs.started_ms = h->first_ms;
  cs.ended_ms = std::max(h->last_ms, h->first_ms + 1);
  master::ConsoleServer server(cs);
  // Off loopback the run's history and logs are shown to whoever has the link: a fresh random
  // token (common/http_access.h), printed in it.
  const std::string token = IsLoopbackHost(f.host) ? "" : security::JobSecret::Generate().ConsoleToken();
  auto port = server.Start(f.host, f.port, std::make_shared<const HttpAccess>(token));
  if (!port.ok()) return Fail("console", port.status());
  std::printf("console of run %s (job %s, %zu points%s): http://%s:%d/%s\nCtrl-C stops it\n", dir.c_str(),
              h->job.c_str(), h->points.size(),
              std::filesystem::exists(dir + "/result.json") ? ", finished" : ", not finished", f.host.c_str(),
              *port, token.empty() ? "" : ("?token=" + token).c_str());
  std::fflush(stdout);
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server.Stop();
  return 0;
}

}  // namespace

void RegisterConsole(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ConsoleFlags>();
  auto* cmd = app.add_subcommand(
      "console",
      "Reopen the web console of a tessera local run, finished or not, from its run directory: the\n"
      "cost curves, evaluations, nodes and status the master wrote to RUN/history.jsonl as the job\n"
      "went, and each process's log. Serves until Ctrl-C.");
  cmd->add_option("--run", f->run, "the run directory")->required();
  cmd->add_option("--host", f->host,
                  "address to serve on (off loopback the printed link carries a token the console asks for)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "port (0: any free port, printed)")->capture_default_str();
  cmd->add_option("--web-dir", f->web_dir, "the console page's files (default: beside this program)");
  cmd->callback([f, exit_code] { *exit_code = RunConsole(*f); });
}

}  // namespace tessera::cli
