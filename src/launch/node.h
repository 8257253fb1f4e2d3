// Node: one process of a launched job on its host, what `tessera node` runs on every MPI rank
// and, over ssh, on every listed host. It reads the job spec the launcher put in etcd, starts
// its role's program (the command line `tessera deploy k8s` puts in a container, from
// deploy/role_argv) in a process group of its own with its output passed through, restarts it
// when it crashes (supervise::ChildState, as `tessera local` does), and ends when:
//   - the launcher writes the stop order into etcd (the job finished, or Ctrl-C): SIGTERM to the
//     program, SIGKILL after a grace period; exit 0. Every node hears the order at once, so a
//     server first waits (up to 20 s) for the trainers to leave, and etcd for every process;
//   - a trainer's program finishes (exit 0); exit 0;
//   - the program crash-loops (the restart policy gives up); exit 1;
//   - SIGTERM/SIGINT reach the node (mpirun aborting, the launcher's fallback): as a stop order;
//   - with stop_on_eof, its stdin closes: the launcher, or its ssh connection, is gone (as the
//     stop order, waiting the same way).
// An etcd node runs /usr/bin/etcd on the address and port of `etcd` instead (peer port + 1).
// Thread-safety: RunNode blocks its caller; `stop` may be set from any thread.
#pragma once

#include <atomic>
#include <string>

#include "supervise/restart_policy.h"
#include "tessera/status.h"

namespace tessera::launch {

struct NodeOptions {
  supervise::Role role = supervise::Role::kTrainer;
  std::string etcd;        // endpoints, host:port[,...]
  std::string job;
  int index = 0;
  std::string advertise;   // TESSERA_ADVERTISE for the program ("": the addressing decides)
  std::string data_dir;    // etcd: its data directory
  bool stop_on_eof = false;
  int host_processes = 0;   // the job's processes on this host (0: mpirun's local size, if any)
  std::string tessera_bin;  // this program
};

// OK when the node's work is done or it was stopped; an error (the program gave up, the spec
// is missing) otherwise.
Status RunNode(const NodeOptions& o, const std::atomic<bool>* stop);

}  // namespace tessera::launch
