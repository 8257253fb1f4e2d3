// Launcher: `tessera launch`, a whole job beyond one machine from one job spec, on the engines a
// cluster already has: one `mpirun` (--mpi) or ssh to the hosts of a hosts file (--hosts, the
// Fabric recipe). Either way it
//   1. starts etcd (on this machine for MPI, on its host over ssh) unless the spec or --etcd
//      names one, creates the job (`tessera job create --if-absent`) and stores the spec in etcd;
//   2. starts a `tessera node` per process (launch/node.h): the mpirun blocks, or one ssh each,
//      with their output gathered in <run>/logs/;
//   3. shows progress (the master's status, the console's address) until every pass is done
//      and the trainers have left, then exports the model, writes <run>/result.json, orders
//      every node to stop, waits for them, and stops etcd.
// A node that fails (its program crash-looped, its host or connection went), mpirun ending
// early, or a stop request (Ctrl-C) stops the whole job the same way; nodes also stop when the
// launcher dies, however it dies (their ssh stdin closes). Thread-safety: Run blocks its caller;
// `stop` may be set from any thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::launch {

struct LaunchOptions {
  std::string spec_path;
  std::vector<std::string> spec_settings;  // --set FIELD=VALUE over the file's (spec/spec_settings.h)
  std::string hosts_file;  // ssh: this file's hosts, or
  bool mpi = false;        // one mpirun
  std::string etcd;        // an etcd to use (host:port,...); empty: the spec's, else one is started
  std::string run_dir;     // default: runs/<job>-<pid>
  std::string model_out;   // default: <run>/model.tsm
  std::string tessera_bin; // this program
  bool dry_run = false;    // print the commands, run nothing
  bool progress_tty = false;

  // MPI
  std::string mpirun = "mpirun";
  std::string mpi_hostfile;
  std::string etcd_host;   // where this machine's etcd listens for the ranks (default: see cmd_launch)
  std::vector<std::string> mpirun_args;

  // ssh
  std::string ssh = "ssh";
  std::vector<std::string> ssh_options;  // each passed as `-o OPTION`
  std::string ssh_identity;              // -i
  std::string remote_tessera;            // the program on the hosts (default: tessera_bin)
  std::string remote_dir = "/tmp/tessera-launch";  // etcd's data on its host: <remote_dir>/<job>-<pid>
  int etcd_port = 2379;                  // etcd's client port on its host (peer: + 1)
};

struct LaunchResult {
  bool completed = false;
  std::string metrics;
  std::string model_path;
  std::string run_dir;
};

StatusOr<LaunchResult> RunLaunch(const LaunchOptions& o, const std::atomic<bool>* stop);

}  // namespace tessera::launch
