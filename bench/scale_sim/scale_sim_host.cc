// scale_sim_host: a process of simulated trainers, started by scale_sim (--trainers-per-process).
// It maps the region scale_sim made for it (trainer_slots.h) and runs the trainers it asks for
// (trainer_host.h) until scale_sim ends it (SIGTERM, or SIGKILL when scale_sim dies). Not meant
// to be run by hand.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/deadlock_checks.h"
#include "coord/connection_sharing.h"
#include "trainer_host.h"

namespace tessera::bench {
namespace {

int Main(int argc, char** argv) {
  std::string region_path;
  SimTrainerOptions t;
  int step_ms = 100, clients_per_connection = 1;
  bool deadlock_checks = false;
  CLI::App app{"scale_sim_host: a process of scale_sim's simulated trainers (started by scale_sim)"};
  app.add_option("--region", region_path, "the trainer region scale_sim made for this process")->required();
  app.add_option("--etcd", t.etcd, "etcd's endpoints, joined by commas")->required();
  app.add_option("--job", t.job, "the job")->required();
  app.add_option("--store", t.store, "the data set store")->required();
  app.add_option("--pservers", t.pservers, "the job's pservers")->required();
  app.add_option("--lease-ttl", t.lease_ttl_seconds, "each trainer's lease TTL, in seconds")->required();
  app.add_option("--batch", t.batch, "records per step")->required();
  app.add_option("--step-ms", step_ms, "the simulated step, in milliseconds")->required();
  app.add_option("--clients-per-connection", clients_per_connection, "clients sharing one connection");
  app.add_flag("--deadlock-checks", deadlock_checks, "absl's lock-order checks left on");
  CLI11_PARSE(app, argc, argv);
  t.step = std::chrono::milliseconds(step_ms);
  spdlog::set_level(spdlog::level::warn);
  if (!deadlock_checks) TurnOffDeadlockChecks();
  ShareConnectionsAmong(clients_per_connection);
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  // SIGTERM and SIGINT are waited for on this thread; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto region = MappedRegion::Open(region_path);
  if (!region.ok())
    return std::fprintf(stderr, "scale_sim_host: %s\n", region.status().ToString().c_str()), 1;
  TrainerHost host(region->get(), t);
  host.Start();
  int sig = 0;
  sigwait(&signals, &sig);
  // Ended by scale_sim: the trainers are not waited for (they may be in a long call); the job
  // is the simulator's and ends with it.
  std::_Exit(0);
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) { return tessera::bench::Main(argc, argv); }
