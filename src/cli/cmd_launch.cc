// `tessera launch`: a whole job beyond one machine from a job spec, over MPI or ssh; and
// `tessera node`: one process of it, as the launcher starts it on each host or MPI rank.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/spec_flags.h"
#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "common/flag_names.h"
#include "common/progress.h"
#include "launch/hosts_file.h"
#include "launch/launcher.h"
#include "launch/node.h"
#include "launch/plan.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

int RunLaunchCmd(launch::LaunchOptions o) {
  std::atomic<bool> stop{false};
  SignalWatcher signals([&](int) { stop = true; });
  o.tessera_bin = SelfPath();
  o.progress_tty = ProgressBar::StderrIsTerminal();
  if (!o.run_dir.empty()) o.run_dir = fs::absolute(o.run_dir).lexically_normal().string();
  if (!o.model_out.empty()) o.model_out = fs::absolute(o.model_out).lexically_normal().string();
  auto r = launch::RunLaunch(o, &stop);
  if (!r.ok()) return Fail("launch", r.status());
  if (o.dry_run) return 0;
  if (!r->completed) {
    std::fprintf(stderr, "tessera launch: stopped before the job finished (run directory %s)\n",
                 r->run_dir.c_str());
    return signals.received() ? 128 + signals.received() : 1;
  }
  std::printf("job finished: %s\nmodel saved to %s\nrun directory %s (logs, result.json)\n",
              r->metrics.c_str(), r->model_path.c_str(), r->run_dir.c_str());
  return 0;
}

struct NodeFlags {
  std::string role;
  std::string etcd, job;
  int index = -1;
  int first_rank = -1;
  std::string advertise;
  std::string data_dir;
  bool stop_on_eof = false;
  int host_processes = 0;
};

int RunNodeCmd(const NodeFlags& f) {
  // Its output goes to an ssh connection or mpirun that may go first: a write then fails
  // instead of ending the node before it has stopped its program.
  ::signal(SIGPIPE, SIG_IGN);
  std::atomic<bool> stop{false};
  SignalWatcher signals([&](int) { stop = true; });
  // Whoever started this node (mpirun, an ssh session) going away for good, killed rather than
  // asked, stops it as SIGTERM would: no rank outlives its launcher.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) stop = true;  // gone already
  launch::NodeOptions o;
  auto role = launch::ParseRole(f.role);
  if (!role.ok()) return Fail("node", role.status().WithContext("--role"));
  o.role = *role;
  o.etcd = f.etcd;
  o.job = f.job;
  o.advertise = f.advertise;
  o.data_dir = f.data_dir;
  o.stop_on_eof = f.stop_on_eof;
  o.host_processes = f.host_processes;
  o.tessera_bin = SelfPath();
  if (f.first_rank >= 0 && f.index >= 0) {
    return Fail("node", Status::InvalidArgument("give --index or --first-rank, not both"));
  }
  o.index = f.index < 0 ? 0 : f.index;
  if (f.first_rank >= 0) {
    auto rank = launch::RankFromEnvironment([](const char* n) { return std::getenv(n); });
    if (!rank.ok()) return Fail("node", rank.status());
    if (*rank < f.first_rank) {
      return Fail("node", Status::InvalidArgument("rank " + std::to_string(*rank) +
                                                  " is before --first-rank " + std::to_string(f.first_rank)));
    }
    o.index = *rank - f.first_rank;
  }
  Status s = launch::RunNode(o, &stop);
  if (!s.ok()) return Fail("node", s);
  return 0;
}

}  // namespace

void RegisterLaunch(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<launch::LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a whole job from a job spec (the one `tessera deploy k8s` reads) on a cluster's hosts:\n"
      "--mpi starts it with one mpirun (a block of ranks per role), --hosts FILE over ssh (one host\n"
      "per line: [user@]address[:port] [etcd master pserver trainer]). It starts etcd unless the\n"
      "spec or --etcd names one, creates the job, starts a `tessera node` per process, shows\n"
      "progress, and when every pass is done exports the model and stops everything; Ctrl-C\n"
      "stops everything too. The store and checkpoint paths of the spec must be the same shared\n"
      "directory on every host. See docs/deploy.md.");
  auto* spec_opt =
      cmd->add_option("--spec", o->spec_path, "the job spec (YAML)")->required()->check(CLI::ExistingFile);
  AddSpecSettings(cmd, spec_opt, &o->spec_settings);
  auto* mpi = cmd->add_flag("--mpi", o->mpi, "launch with mpirun (Open MPI, or an MPICH with PMI_RANK)");
  auto* hosts = cmd->add_option("--hosts", o->hosts_file, "launch over ssh on the hosts of this file")
                    ->check(CLI::ExistingFile);
  mpi->excludes(hosts);
  cmd->add_option(flags::kEtcd, o->etcd,
                  "an etcd to use, host:port[,...] (default: the spec's, else one is started)");
  cmd->add_option("--run", o->run_dir, "run directory: logs, result.json, model (default: runs/<job>-<pid>)");
  cmd->add_option("--model-out", o->model_out, "where the trained model goes (default: RUN/model.tsm)");
  cmd->add_flag("--dry-run", o->dry_run, "print the commands it would run (mpirun, ssh) and stop");
  cmd->add_option("--mpirun", o->mpirun, "the mpirun program")->capture_default_str();
  cmd->add_option("--hostfile", o->mpi_hostfile,
                  "MPI: mpirun's --hostfile (default: every rank on this machine)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--etcd-host", o->etcd_host,
                  "MPI: the address of this machine the ranks reach its etcd at (default: 127.0.0.1 without "
                  "--hostfile, else the route toward its first host)");
  cmd->add_option("--mpirun-arg", o->mpirun_args,
                  "MPI: one more word for mpirun, before the blocks (repeatable; one word each, as "
                  "--mpirun-arg=--mca --mpirun-arg=btl_tcp_if_include --mpirun-arg=eth0)")
      ->allow_extra_args(false);
  cmd->add_option("--ssh", o->ssh, "ssh: the ssh program")->capture_default_str();
  cmd->add_option("--ssh-option", o->ssh_options,
                  "ssh: one -o option (repeatable), e.g. StrictHostKeyChecking=accept-new")
      ->allow_extra_args(false);
  cmd->add_option("--ssh-identity", o->ssh_identity, "ssh: the private key (-i)");
  cmd->add_option("--remote-tessera", o->remote_tessera,
                  "ssh: the tessera program on the hosts (default: this program's path)");
  cmd->add_option("--remote-dir", o->remote_dir, "ssh: where etcd keeps its data on its host")
      ->capture_default_str();
  cmd->add_option("--etcd-port", o->etcd_port, "ssh: etcd's client port on its host (peer: +1)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65534));
  cmd->callback([o, exit_code] {
    if (!o->mpi && o->hosts_file.empty()) {
      *exit_code =
          Fail("launch", Status::InvalidArgument("say where: --mpi (one mpirun) or --hosts FILE (ssh)"));
      return;
    }
    *exit_code = RunLaunchCmd(*o);
  });
}

void RegisterNode(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<NodeFlags>();
  auto* cmd = app.add_subcommand(
      flags::kCommandNode,
      "One process of a launched job on this host (what `tessera launch` starts on each MPI rank\n"
      "or over ssh; rarely run by hand): it reads the job spec from etcd, runs its role's program\n"
      "(restarted if it crashes), and stops when the launcher says so. Under mpirun, --first-rank\n"
      "K makes the index this rank - K (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK).");
  cmd->add_option(flags::kRole, f->role, "etcd, master, pserver or trainer")->required();
  cmd->add_option(flags::kEtcd, f->etcd, "etcd endpoints, host:port[,...] (an etcd node: where it listens)")
      ->required();
  cmd->add_option(flags::kJob, f->job, "the job")->required();
  cmd->add_option(flags::kIndex, f->index, "this node's index within its role (pserver index, trainer id)");
  cmd->add_option(flags::kFirstRank, f->first_rank, "MPI: the first rank of this role's block");
  cmd->add_option("--advertise", f->advertise, "the address this host is reached at (TESSERA_ADVERTISE)");
  cmd->add_option(flags::kDataDir, f->data_dir, "an etcd node: its data directory");
  cmd->add_flag(flags::kStopOnEof, f->stop_on_eof, "stop when stdin closes (the launcher's ssh connection)");
  cmd->add_option(flags::kHostProcesses, f->host_processes,
                  "the job's processes on this host: a trainer's math libraries get cores / N threads "
                  "(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS) unless any is set (default: "
                  "mpirun's local size)")
      ->check(CLI::Range(1, 100000));
  cmd->callback([f, exit_code] { *exit_code = RunNodeCmd(*f); });
}

}  // namespace tessera::cli
