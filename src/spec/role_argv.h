// The command line of each role of a job, built from its spec in one place: the containers of
// `tessera deploy k8s`, the processes `tessera node` starts for `tessera launch` (MPI, ssh) and
// the children of `tessera local` (and so of the platform's jobs) run exactly these, each place
// adding only where it is (etcd, the job's name, an index, its run directory). Arguments come after the
// program name ("tessera"). Pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "spec/job_spec.h"

namespace tessera::spec {

// Ports: a pod runs one process and has the spec's fixed ports (probes and Services name them);
// a launched host may run several of a role, so each takes any free port on every interface and
// registers it in etcd; `tessera local` runs every process on one machine, on the commands' own
// defaults (loopback, any free port).
enum class PortChoice { kSpec, kAny, kLocal };

// `tessera master ...`: listens on every interface, advertises what the addressing decides.
std::vector<std::string> MasterArgs(const JobSpec& s, PortChoice ports);
// `tessera pserver ...`, with checkpoints when the spec has them.
std::vector<std::string> PserverArgs(const JobSpec& s, PortChoice ports);
// The trainer's program: `tessera train ...` for a built-in model (after "tessera"), or the
// spec's own command (a full argv, program first). `builtin` says which.
struct TrainerCommand {
  bool builtin = true;
  std::vector<std::string> argv;
};
TrainerCommand TrainerArgs(const JobSpec& s);
// What every etcd Tessera starts runs with, beside where it listens and keeps its data (`tessera
// local`'s, `tessera node`'s, the Kubernetes manifests'): its history compacted after
// `kEtcdHistoryRetention`, so the database does not grow with every task of a long job (the
// master's event log writes a revision per task; docs/scale.md). Every watch re-lists after a
// compaction.
inline constexpr char kEtcdHistoryRetention[] = "10m";
std::vector<std::string> EtcdServerFlags(const std::string& retention = kEtcdHistoryRetention);
// What a trainer learns from its environment (TESSERA_* beyond etcd and the job), in order.
std::vector<std::pair<std::string, std::string>> TrainerEnv(const JobSpec& s, PortChoice ports);

}  // namespace tessera::spec
