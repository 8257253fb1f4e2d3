// Node (see node.h): the shell around one local::ChildState.
#include "launch/node.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "common/addressing.h"
#include "common/cgroup.h"
#include "common/clock.h"
#include "common/flag_names.h"
#include "common/math_threads.h"
#include "common/process.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "launch/plan.h"
#include "local/child_commands.h"
#include "local/child_state.h"
#include "local/registrations.h"
#include "spec/job_spec.h"
#include "spec/role_argv.h"

namespace tessera::launch {
namespace {

using local::Role;

constexpr std::chrono::seconds kStopGrace{15};
constexpr std::chrono::seconds kDrainLimit{20};  // a server waits this long for the trainers to leave
constexpr std::chrono::seconds kEtcdWait{120};   // a launcher may start etcd just before its nodes

void Say(const std::string& line) {
  std::fprintf(stderr, "tessera node: %s\n", line.c_str());
  std::fflush(stderr);
}

// Whether stdin has reached its end (checked without blocking).
bool StdinClosed() {
  pollfd p{0, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  char buf[256];
  return ::read(0, buf, sizeof buf) == 0;  // data is read and dropped; 0 bytes: the end
}

StatusOr<ProcessOptions> EtcdProgram(const NodeOptions& o) {
  if (o.data_dir.empty()) return Status::InvalidArgument("an etcd node needs --data-dir");
  TESSERA_ASSIGN_OR_RETURN(HostPort hp,
                           ParseHostPort(Split(o.etcd, ',').empty() ? "" : Split(o.etcd, ',')[0]));
  if (hp.port > 65534) return Status::InvalidArgument("--etcd " + o.etcd + ": its port + 1 is the peer port");
  const std::string c = "http://" + JoinHostPort(hp.host, hp.port),
                    p = "http://" + JoinHostPort(hp.host, hp.port + 1);
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec) return Status::Unavailable("cannot create " + o.data_dir + ": " + ec.message());
  ProcessOptions po;
  po.argv = {"/usr/bin/etcd",
             "--name=" + o.job + "-etcd",
             "--data-dir=" + o.data_dir + "/data",
             "--listen-client-urls=" + c,
             "--advertise-client-urls=" + c,
             "--listen-peer-urls=" + p,
             "--initial-advertise-peer-urls=" + p,
             "--initial-cluster=" + o.job + "-etcd=" + p,
             "--logger=zap",
             "--log-level=warn"};
  return po;
}

// The job spec the launcher stored, waiting for etcd (and the key) up to kEtcdWait.
StatusOr<spec::JobSpec> ReadSpec(etcd::EtcdClient* etcd, const NodeOptions& o,
                                 const std::atomic<bool>* stop) {
  const Deadline deadline(kEtcdWait);
  Status last = Status::Unavailable("etcd at " + o.etcd + " did not answer");
  while (!deadline.expired() && !(stop && stop->load())) {
    etcd::CallOptions quick;
    quick.retry_timeout = std::chrono::seconds(2);
    auto got = etcd->Get(keys::LaunchSpec(o.job), {}, quick);
    if (got.ok() && !got->kvs.empty())
      return spec::ParseJobSpec(got->kvs[0].value, "the launched spec in etcd");
    last = got.ok() ? Status::NotFound("job '" + o.job + "' has no launch spec in etcd at " + o.etcd +
                                       " (nodes are started by `tessera launch`)")
                    : got.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return last;
}

StatusOr<ProcessOptions> RoleProgram(const NodeOptions& o, const spec::JobSpec& s) {
  ProcessOptions po;
  po.env = {{flags::kEnvEtcd, o.etcd}, {flags::kEnvJob, o.job}};
  if (!o.advertise.empty()) po.env["TESSERA_ADVERTISE"] = o.advertise;
  for (const auto& [k, v] : s.TlsEnv()) po.env[k] = v;  // a --tls job's certificates on this host
  std::vector<std::string> args;
  switch (o.role) {
    case Role::kMaster:
      args = spec::MasterArgs(s, spec::PortChoice::kAny);
      break;
    case Role::kPserver:
      args = spec::PserverArgs(s, spec::PortChoice::kAny);
      args.insert(args.end(), {flags::kIndex, std::to_string(o.index)});
      for (const auto& [k, v] : NodeBusyPollEnv(o.host_processes, HostCores(), ::getenv)) po.env[k] = v;
      break;
    case Role::kTrainer: {
      for (const auto& [k, v] : spec::TrainerEnv(s, spec::PortChoice::kAny)) po.env[k] = v;
      po.env[flags::kEnvTrainerId] = std::to_string(o.index);
      for (const auto& [k, v] : local::PythonPathBeside(o.tessera_bin)) po.env[k] = v;
      // Its share of the host's cores for its math libraries, and busy polling if it has a core of
      // its own, unless the user chose.
      for (const auto& [k, v] : NodeMathThreadEnv(o.host_processes, HostCores(), ::getenv)) po.env[k] = v;
      for (const auto& [k, v] : NodeBusyPollEnv(o.host_processes, HostCores(), ::getenv)) po.env[k] = v;
      spec::TrainerCommand cmd = spec::TrainerArgs(s);
      if (!cmd.builtin) {
        po.argv = cmd.argv;
        if (!po.argv.empty() && po.argv[0].find('/') == std::string::npos) {
          // Process execs a path: find the program on PATH as a shell would.
          po.argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\""};
          po.argv.insert(po.argv.end(), cmd.argv.begin(), cmd.argv.end());
        }
        return po;
      }
      args = cmd.argv;
      break;
    }
    case Role::kEtcd:
      return EtcdProgram(o);
  }
  po.argv = {o.tessera_bin};
  po.argv.insert(po.argv.end(), args.begin(), args.end());
  return po;
}

// Whether the processes a node of `role` outlasts have left: the trainers (for servers), every
// registered process (for etcd). An etcd that does not answer has nothing to wait for.
bool Drained(etcd::EtcdClient* etcd, const std::string& job, Role role) {
  std::vector<std::string> prefixes = {keys::TrainerPrefix(job)};
  if (role == Role::kEtcd) {
    prefixes.push_back(keys::PserverPrefix(job));
    prefixes.push_back(keys::MasterElectionPrefix(job));
  }
  for (const auto& prefix : prefixes) {
    etcd::GetOptions count;
    count.prefix = true;
    count.count_only = true;
    etcd::CallOptions quick;
    quick.retry_timeout = std::chrono::milliseconds(400);
    auto got = etcd->Get(prefix, count, quick);
    if (got.ok() && got->count > 0) return false;
  }
  return true;
}

}  // namespace

Status RunNode(const NodeOptions& o, const std::atomic<bool>* stop) {
  const std::string name = std::string(local::RoleName(o.role)) + "-" + std::to_string(o.index);
  std::unique_ptr<etcd::EtcdClient> etcd;
  ProcessOptions program;
  if (o.role == Role::kEtcd) {
    TESSERA_ASSIGN_OR_RETURN(program, EtcdProgram(o));
  } else {
    etcd::EtcdOptions eo;
    eo.endpoints = Split(o.etcd, ',');
    TESSERA_ASSIGN_OR_RETURN(etcd, etcd::EtcdClient::Create(eo));
    TESSERA_ASSIGN_OR_RETURN(auto spec, ReadSpec(etcd.get(), o, stop));
    TESSERA_ASSIGN_OR_RETURN(program, RoleProgram(o, spec));
  }
  program.inherit_output = true;
  program.new_process_group = true;
  // Found and stopped by control group where this node may make one (see common/cgroup.h), so
  // what its process leaves behind, a daemon outside its process group included, ends with it.
  auto cgroup = CreateSupervisorGroup("tessera-node-");
  struct RemoveAtEnd {
    std::unique_ptr<Cgroup> g;
    ~RemoveAtEnd() {
      if (g && g->Kill(std::chrono::seconds(10)).ok()) (void)g->Remove();
    }
  } group{cgroup.ok() ? std::move(*cgroup) : nullptr};
  program.cgroup_parent = group.g.get();
  local::ChildState state(name, o.role);
  std::unique_ptr<Process> proc;
  auto spawn = [&]() -> Status {
    Say(fmt::format("{} on {}: starting {}", name, o.advertise.empty() ? "this host" : o.advertise,
                    Join(program.argv, " ")));
    TESSERA_ASSIGN_OR_RETURN(proc, Process::Spawn(program));
    state.Spawned(Now());
    return Status::OK();
  };
  TESSERA_RETURN_IF_ERROR(spawn());
  if (!etcd) {  // the etcd node watches its own etcd, to stop only after the job's processes
    etcd::EtcdOptions eo;
    eo.endpoints = Split(o.etcd, ',');
    TESSERA_ASSIGN_OR_RETURN(etcd, etcd::EtcdClient::Create(eo));
  }
  TimePoint next_check = Now();
  std::string stop_reason;
  std::optional<TimePoint> drain_until;
  for (;;) {
    if (stop_reason.empty()) {
      if (stop && stop->load()) stop_reason = "a signal";
      if (o.stop_on_eof && StdinClosed()) stop_reason = "its launcher is gone (stdin closed)";
      if (stop_reason.empty() && o.role != Role::kEtcd && Now() >= next_check) {
        next_check = Now() + std::chrono::milliseconds(500);
        etcd::CallOptions quick;
        quick.retry_timeout = std::chrono::milliseconds(400);
        auto order = etcd->Get(keys::LaunchStop(o.job), {}, quick);
        if (order.ok() && !order->kvs.empty()) stop_reason = "the launcher (" + order->kvs[0].value + ")";
      }
      if (!stop_reason.empty()) {
        Say(name + ": stopping, as asked by " + stop_reason);
        // Every node hears at once; servers outlast the trainers (which finish their step
        // against them, as under `tessera local`) and etcd outlasts them all. A signal asks
        // for haste: no waiting.
        if (o.role != Role::kTrainer && !(stop && stop->load())) drain_until = Now() + kDrainLimit;
      }
    }
    if (!stop_reason.empty() && !state.stopped() && Now() >= next_check) {
      next_check = Now() + std::chrono::milliseconds(250);
      const bool drained = !drain_until || Now() >= *drain_until || (stop && stop->load()) ||
                           Drained(etcd.get(), o.job, o.role);
      if (drained && state.Stop().kind == local::ChildAction::Kind::kTerminate && proc)
        proc->Stop(kStopGrace);
    }
    if (state.alive() && proc && !proc->running()) {
      // What it registered is released now, not after its lease (as `tessera local` does).
      if (o.role != Role::kEtcd) {
        auto n = local::RevokeLeasesOf(etcd.get(), o.job, proc->pid());
        if (n.ok() && *n > 0) Say(fmt::format("{}: its registration released at once", name));
      }
      local::ChildAction a = state.Exited(proc->exit_code().value_or(-1), Now());
      if (!a.event.empty()) Say(a.event);
    }
    if (state.phase() == local::ChildPhase::kDone) return Status::OK();
    if (state.phase() == local::ChildPhase::kFailed) return Status::Aborted(state.failure());
    local::ChildAction a = state.Tick(Now());
    if (!a.event.empty()) Say(a.event);
    if (a.kind == local::ChildAction::Kind::kSpawn) TESSERA_RETURN_IF_ERROR(spawn());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace tessera::launch
