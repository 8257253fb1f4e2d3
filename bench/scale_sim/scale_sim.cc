// scale_sim: the control plane of a job with N trainers and P pservers, on this machine. A real
// etcd, the real master (`tessera master`), and N trainers and P pservers that run the real
// coordination code (sim_trainer.h, sim_pserver.h) with the data plane and the compute replaced
// by a sleep per step. Each trainer and pserver is a thread with the etcd clients its process
// would have: the coordination code blocks (gRPC calls, watches, lease keepers each on a thread),
// so threads run it unchanged. The pservers are threads of this process; the trainers are spread
// over trainer host processes of --trainers-per-process each (trainer_fleet.h): 1,000 trainers
// are some 8,000 threads, and in one process their gRPC pollers alone took both cores (with a
// poller per blocked call, each woken on every event). --clients-per-connection lets several
// clients share a TCP connection (each keeps its own calls, streams and watches), so that a small
// machine is not also paying for the connections of a thousand processes.
//
// Scenarios, in one run for each size: the join storm (all N trainers started at once: time until
// every one has its first record), a steady window of the pass (etcd's requests per second by
// kind, the master's CPU and memory), a pserver killed (its lease no longer kept; a replacement
// waits for the index: time until every trainer's directory shows it), a tenth of the trainers
// leaving and coming back (time until the newcomers train), and the leading master killed (a
// standby takes over: time until it serves, and until every trainer had a task acknowledged).
// Prints a Markdown row per size, and with --json one JSON object per size. --long: instead, the
// passes of a small job one after another, and etcd's database every 5 passes.
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/deadlock_checks.h"
#include "common/files.h"
#include "coord/connection_sharing.h"
#include "harness/etcd_cluster.h"
#include "harness/etcd_server.h"
#include "sim_run.h"

namespace tessera::bench {
namespace {

// On Ctrl-C or SIGTERM: etcd killed and the temporary directories removed before exiting (the
// master and any other child end with this process). A thread waits for the signals, which every
// other thread blocks.
class InterruptCleanup {
 public:
  InterruptCleanup() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);  // before any thread starts: inherited
    std::thread([this] {
      int sig = 0;
      if (sigwait(&signals_, &sig) != 0) return;
      std::fprintf(stderr, "scale_sim: interrupted; removing its temporary files\n");
      std::lock_guard<std::mutex> lock(mu_);
      for (pid_t p : etcd_pids_) ::kill(p, SIGKILL);
      for (const auto& d : dirs_) (void)RemoveAll(d);
      std::_Exit(128 + sig);
    }).detach();
  }
  void Add(const std::string& dir, std::vector<pid_t> etcd_pids = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(dir);
    etcd_pids_.insert(etcd_pids_.end(), etcd_pids.begin(), etcd_pids.end());
  }

 private:
  sigset_t signals_;
  std::mutex mu_;
  std::vector<std::string> dirs_;
  std::vector<pid_t> etcd_pids_;
};

std::string Row(const Json& r) {
  char line[640];
  const Json& k = r.value("pserver_killed", Json::object());
  const Json& c = r.value("churn", Json::object());
  const Json& m = r.value("master_killed", Json::object());
  std::snprintf(
      line, sizeof line,
      "| %d | %d | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f | %.1f | %.0f | %.2f | %.2f | %.1f | %.1f | "
      "%.1f | %.1f |",
      r["trainers"].get<int>(), r["pservers"].get<int>(), r["join_storm_s"].get<double>(),
      r["etcd_requests_per_trainer_s"].get<double>(), r.value("etcd_trainer_requests_per_trainer_s", -1.0),
      r["etcd_per_s"].value("keepalive", 0.0),
      r["etcd_per_s"].value("txn", 0.0) + r["etcd_per_s"].value("put", 0.0),
      r["etcd_per_s"].value("range", 0.0), r["master_cpu_pct"].get<double>(),
      r["master_rss_mib"].get<double>(), r["etcd_db_mib"].get<double>(), k.value("moved_s", -1.0),
      k.value("watch_events_per_trainer", -1.0), c.value("newcomers_training_s", -1.0),
      m.value("standby_serving_s", -1.0), m.value("every_trainer_acked_s", -1.0));
  return line;
}

int Main(int argc, char** argv) {
  SimOptions o;
  CLI::App app{
      "scale_sim: the control plane of N trainers and P pservers (real etcd, real master, simulated "
      "compute)"};
  app.add_option("--trainers", o.trainers, "trainer counts to run, each a size (e.g. 10,100,1000)")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--pservers", o.pservers, "pserver counts to run with each trainer count")
      ->delimiter(',')
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--steps", o.steps, "steps per trainer per pass")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch", o.batch, "records per step")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--step-ms", o.step_ms, "the simulated step, in milliseconds")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--lease-ttl", o.lease_ttl, "every lease's TTL, in seconds")
      ->check(CLI::Range(2, 3600))
      ->capture_default_str();
  app.add_option("--window", o.window_s, "seconds of the steady window")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  app.add_flag("--smoke", o.smoke, "a short run that checks every scenario (make test)");
  app.add_option("--json", o.json_path, "also write one JSON object per size to this file");
  app.add_option("--etcd-retention", o.etcd_retention,
                 "etcd's history kept before it is compacted, as the etcd a job starts keeps it "
                 "(spec::EtcdServerFlags); 0: never compacted, as before 2026-11-28")
      ->capture_default_str();
  app.add_option("--etcd-members", o.etcd_members, "etcd's members: 1, or a cluster of 3 (or 5) on loopback")
      ->check(CLI::IsMember({1, 3, 5}))
      ->capture_default_str();
  app.add_option("--clients-per-connection", o.clients_per_connection,
                 "etcd and master clients that share one connection (each keeps its own calls and watches): "
                 "more than 1 spares a small machine the simulated processes' connections")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--trainers-per-process", o.trainers_per_process,
                 "simulated trainers per trainer process (scale_sim_host); 0: all of them threads of "
                 "this process")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--given-trainer-ids", o.given_ids,
               "give each trainer its id (0, 1, ...), as a launcher does (a pod's index, an MPI rank), "
               "instead of each claiming the lowest free one");
  app.add_flag(
      "--deadlock-checks", o.deadlock_checks,
      "leave absl's lock-order checks on (gRPC's mutexes) in the simulator and its trainer processes, "
      "as every Tessera process had them before 2026-11-29 (the real master and pservers have them off)");
  app.add_option(
      "--long", o.long_passes,
      "instead of the sizes: the first --trainers and --pservers count run this many short passes, "
      "etcd's database size printed every 5 passes");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // a thousand trainers' task notes are not the figures
  // Off as in every Tessera process (common/deadlock_checks.h): the simulated trainers and
  // pservers are threads of these processes.
  if (!o.deadlock_checks) TurnOffDeadlockChecks();
  ShareConnectionsAmong(o.clients_per_connection);
  // The master's binary is found beside this one's when the build tree is not named.
  if (const char* b = std::getenv("TESSERA_BUILD_DIR"); b == nullptr || *b == '\0') {
    char self[4096];
    const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
      const std::string exe(self, static_cast<size_t>(len));  // <build>/bench/scale_sim
      ::setenv("TESSERA_BUILD_DIR", exe.substr(0, exe.rfind("/bench/")).c_str(), 1);
    }
  }
  if (o.smoke) {
    // Three trainer processes, so that the smoke goes through the hosts' shared slots.
    if (app.count("--trainers-per-process") == 0) o.trainers_per_process = 4;
    o.trainers = {10};
    o.pservers = {2};
    o.window_s = 2;
    o.lease_ttl = 3;
    o.steps = 200;
    o.batch = 32;
    o.step_ms = 20;
  }
  // Each simulated trainer holds some 4 connections (2 to etcd, 2 to the master), and the master
  // and etcd (started from here) as many: raise the descriptor limit to what is allowed.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  static InterruptCleanup* interrupted = new InterruptCleanup;  // lives until the process ends
  auto dir = MakeTempDir("scale-sim-");
  if (!dir.ok()) return std::fprintf(stderr, "%s\n", dir.status().ToString().c_str()), 1;
  interrupted->Add(*dir);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)RemoveAll(dir); }
  } cleanup{*dir};
  const std::vector<std::string> etcd_flags =
      o.etcd_retention == "0" ? std::vector<std::string>{} : spec::EtcdServerFlags(o.etcd_retention);
  EtcdUnderTest etcd;
  std::unique_ptr<testing::EtcdServer> single;
  std::unique_ptr<testing::EtcdCluster> cluster;
  if (o.etcd_members == 1) {
    testing::EtcdServerOptions eo;
    eo.flags = etcd_flags;
    auto server = testing::EtcdServer::Launch(eo);
    if (!server.ok()) return std::fprintf(stderr, "%s\n", server.status().ToString().c_str()), 1;
    single = std::move(*server);
    interrupted->Add(single->dir(), {single->pid()});
    etcd = {{single->endpoint()}, {single->pid()}};
  } else {
    auto launched = testing::EtcdCluster::Launch({o.etcd_members, etcd_flags});
    if (!launched.ok()) return std::fprintf(stderr, "%s\n", launched.status().ToString().c_str()), 1;
    cluster = std::move(*launched);
    interrupted->Add(cluster->dir(), cluster->pids());
    etcd = {cluster->endpoints(), cluster->pids()};
  }
  if (o.long_passes > 0) {
    // Short passes: four tasks of 10 steps of 5 ms a trainer.
    o.steps = 40;
    o.step_ms = 5;
    Run run(o, etcd, *dir, o.trainers.front(), o.pservers.front());
    auto r = run.Long(o.long_passes);
    if (!r.ok()) {
      std::fprintf(stderr, "scale_sim --long: %s\n", r.status().ToString().c_str());
      return 1;
    }
    std::printf("%s\n", r->dump(2).c_str());
    return 0;
  }
  std::printf(
      "| trainers | pservers | join storm (s) | etcd req/trainer/s | the trainers' own | keep-alives/s | "
      "puts+txns/s | ranges/s "
      "| "
      "master CPU %% | master MiB | etcd DB MiB | pserver killed: moved (s) | watch events/trainer | churn: "
      "newcomers (s) | master killed: standby serves (s) | every trainer acked (s) "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::ofstream json_out;
  if (!o.json_path.empty()) json_out.open(o.json_path);
  int code = 0;
  for (int p : o.pservers) {
    for (int n : o.trainers) {
      Run run(o, etcd, *dir, n, p);
      auto r = run.Go();
      if (!r.ok()) {
        std::fprintf(stderr, "scale_sim: %d trainers, %d pservers: %s\n", n, p,
                     r.status().ToString().c_str());
        code = 1;
        continue;
      }
      std::printf("%s\n", Row(*r).c_str());
      std::fflush(stdout);
      if (json_out) json_out << r->dump() << "\n";
      if (o.smoke) {
        // Every scenario settled: the replacement reached every trainer, the newcomers trained,
        // every trainer had a task acknowledged by the standby master.
        auto figure = [&](const char* scenario, const char* name) {
          return r->value(scenario, Json::object()).value(name, -1.0);
        };
        const double moved = figure("pserver_killed", "moved_s"),
                     newcomers = figure("churn", "newcomers_training_s"),
                     failed_over = figure("master_killed", "every_trainer_acked_s");
        if (moved < 0 || newcomers < 0 || failed_over < 0 ||
            (*r)["etcd_per_s"].value("keepalive", 0.0) <= 0) {
          std::fprintf(stderr, "scale_sim --smoke: a scenario did not settle: %s\n", r->dump().c_str());
          code = 1;
        }
        // One etcd connection a trainer: its reader's is its own (client/reader_on.h). Beside
        // them: what was held before the trainers came (pservers, masters, this process, and
        // one per etcd member for its own gateway) and a little room for a connection closing.
        const int connections = r->value("etcd_connections", 0);
        const int most = r->value("etcd_connections_fixed", 0) + r->value("trainers", 0) + 2;
        if (connections > most) {
          std::fprintf(stderr, "scale_sim --smoke: etcd holds %d connections, more than %d: %s\n",
                       connections, most, r->dump().c_str());
          code = 1;
        }
      }
    }
  }
  return code;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) { return tessera::bench::Main(argc, argv); }
