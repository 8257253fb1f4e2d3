// The launch plan: which processes a job spec asks for, where each runs (`--hosts`), and the
// command lines that start them: `tessera node` on each host over ssh, or one `mpirun` whose
// blocks of ranks are the roles (`--mpi`). Pure functions, tested in launch_unit_test.
//
// Placement: etcd on the host that lists it (else the first), then masters, pservers and
// trainers, each on the least loaded host that may run its role (ties: the earlier line), so a
// leader and its standby, and pservers, land on different hosts when there are enough.
// Launchers start trainers.max trainers (a Kubernetes Job starts trainers.min and scales).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launch/hosts_file.h"
#include "spec/job_spec.h"
#include "supervise/restart_policy.h"
#include "tessera/status.h"

namespace tessera::launch {

struct NodePlan {
  supervise::Role role = supervise::Role::kTrainer;
  int index = 0;    // within its role: the pserver index, the trainer id, the master's number
  size_t host = 0;  // into the hosts list
  std::string Name() const { return std::string(supervise::RoleName(role)) + "-" + std::to_string(index); }
};

// Every process of the job (etcd first when `with_etcd`), placed on `hosts`. Fails, naming
// `origin` (the hosts file), when no host may run a role the job needs.
StatusOr<std::vector<NodePlan>> PlaceNodes(const spec::JobSpec& s, const std::vector<HostEntry>& hosts,
                                           bool with_etcd, const std::string& origin);

// `tessera node` arguments (after the program) for one process of a launched job.
struct NodeArgsOptions {
  supervise::Role role = supervise::Role::kTrainer;
  std::string etcd;        // host:port[,host:port...]
  std::string job;
  int index = -1;          // the node's index, or
  int first_rank = -1;     // MPI: the first rank of the role's block (index = rank - first_rank)
  std::string advertise;   // the address the host is reached at ("": the node decides)
  std::string data_dir;    // etcd: its data directory
  bool stop_on_eof = false;  // ssh: stdin closing (the launcher or its connection gone) stops the node
  int host_processes = 0;    // ssh: the job's processes placed on this host (0: not said)
};
std::vector<std::string> NodeArgs(const NodeArgsOptions& o);

// One mpirun command line for a whole job: a block of ranks per role (masters, pservers,
// trainers.max trainers), each running `tessera node --role R --first-rank K`.
struct MpiOptions {
  std::string mpirun = "mpirun";
  std::string tessera;    // the tessera program, at the same path on every host
  std::string etcd;
  std::string job;
  std::string hostfile;   // empty: every rank on this machine (oversubscribed: ranks are processes, not cores)
  bool as_root = false;   // Open MPI refuses root unless told
  std::vector<std::string> extra;  // more mpirun options, before the blocks
};
std::vector<std::string> MpirunArgv(const spec::JobSpec& s, const MpiOptions& m);

// This process's rank in MPI_COMM_WORLD from what the launcher exported: OMPI_COMM_WORLD_RANK
// (Open MPI), PMIX_RANK (PMIx), PMI_RANK (MPICH/Hydra). NotFound when none is set.
StatusOr<int> RankFromEnvironment(const std::function<const char*(const char*)>& getenv);

// How many ranks of the job run on this host, from what the launcher exported:
// OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI), MPI_LOCALNRANKS (MPICH/Hydra); 0 when neither is set
// or it is not a positive number.
int LocalSizeFromEnvironment(const std::function<const char*(const char*)>& getenv);

// The job's processes `plan` places on host `host` (etcd, mostly idle, not counted).
int ProcessesOnHost(const std::vector<NodePlan>& plan, size_t host);

// A trainer node's math library threads (common/math_threads.h): its share of `cores` among
// `host_processes` (what the ssh launcher said), else among mpirun's local size; nothing when
// neither is known or the environment already chose.
std::vector<std::pair<std::string, std::string>> NodeMathThreadEnv(
    int host_processes, int cores, const std::function<const char*(const char*)>& getenv);
// A trainer or pserver node's busy polling (common/busy_poll.h): TESSERA_BUSY_POLL_US on when
// the host's processes (counted as above) have a core each, off when not; nothing when unknown
// or the environment already chose.
std::vector<std::pair<std::string, std::string>> NodeBusyPollEnv(
    int host_processes, int cores, const std::function<const char*(const char*)>& getenv);

// From mpirun's output: the first rank it names as failed ("Process name: [[J,1],R]") and the
// last 12 lines that rank wrote ("[1,R]<stderr>:..."), for the error the launcher shows; "" when
// mpirun named none.
std::string FailedRankLines(const std::string& mpirun_output);

// The first host an Open MPI hostfile names ("node1 slots=4"; '#' comments), "" for none.
std::string FirstHostInHostfile(const std::string& text);

// `ssh ... DESTINATION 'remote command'` for one host: the user's -o options first (ssh keeps
// the first value of an option), then BatchMode (keys, never a password prompt), timeouts that
// notice a dead host, the port.
struct SshOptions {
  std::string ssh = "ssh";
  std::vector<std::string> options;  // each passed as -o OPTION
  std::string identity;              // -i
};
std::vector<std::string> SshCommand(const SshOptions& o, const HostEntry& h, const std::string& remote_command);

}  // namespace tessera::launch
