// Node (see node.h): the shell around one supervise::ChildState.
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
#include "spec/job_spec.h"
#include "spec/role_argv.h"
#include "supervise/child_state.h"
#include "supervise/python_path.h"
#include "supervise/registrations.h"

namespace tessera::launch {
namespace {

using supervise::Role;

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
  for (auto& f : spec::EtcdServerFlags()) po.argv.push_back(std::move(f));
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
      for (const auto& [k, v] : supervise::PythonPathBeside(o.tessera_bin)) po.env[k] = v;
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

// One node's run, as phases: Prepare (its program: etcd, or its role's from the spec in etcd),
// Start (in a control group of its own where it may make one), then Supervise: restarted as
// its ChildState says, and stopped when asked (WatchForStop), servers draining first.
class NodeRun {
 public:
  NodeRun(const NodeOptions& o, const std::atomic<bool>* stop)
      : o_(o),
        stop_(stop),
        name_(std::string(supervise::RoleName(o.role)) + "-" + std::to_string(o.index)),
        state_(name_, o.role) {}
  ~NodeRun() {
    proc_.reset();  // the program first (its process group), then whatever is left in its control group
    if (group_ && group_->Kill(std::chrono::seconds(10)).ok()) (void)group_->Remove();
  }

  Status Prepare() {
    if (o_.role == Role::kEtcd) {
      TESSERA_ASSIGN_OR_RETURN(program_, EtcdProgram(o_));
    } else {
      TESSERA_RETURN_IF_ERROR(ConnectEtcd());
      TESSERA_ASSIGN_OR_RETURN(auto spec, ReadSpec(etcd_.get(), o_, stop_));
      TESSERA_ASSIGN_OR_RETURN(program_, RoleProgram(o_, spec));
    }
    program_.inherit_output = true;
    program_.new_process_group = true;
    return Status::OK();
  }

  // Found and stopped by control group where this node may make one (see common/cgroup.h), so
  // what its process leaves behind, a daemon outside its process group included, ends with it.
  Status Start() {
    auto cgroup = CreateSupervisorGroup("tessera-node-");
    if (cgroup.ok()) group_ = std::move(*cgroup);
    program_.cgroup_parent = group_.get();
    TESSERA_RETURN_IF_ERROR(Spawn());
    // The etcd node watches its own etcd, to stop only after the job's processes.
    if (!etcd_) TESSERA_RETURN_IF_ERROR(ConnectEtcd());
    return Status::OK();
  }

  // Until the program is done (OK) or gave up (Aborted); every 50 ms.
  Status Supervise() {
    for (;;) {
      WatchForStop();
      if (!stop_reason_.empty() && !state_.stopped() && Now() >= next_check_) {
        next_check_ = Now() + std::chrono::milliseconds(250);
        const bool drained =
            !drain_until_ || Now() >= *drain_until_ || signalled() || Drained(etcd_.get(), o_.job, o_.role);
        if (drained && state_.Stop().kind == supervise::ChildAction::Kind::kTerminate && proc_)
          proc_->Stop(kStopGrace);
      }
      if (state_.alive() && proc_ && !proc_->running()) Reap();
      if (state_.phase() == supervise::ChildPhase::kDone) return Status::OK();
      if (state_.phase() == supervise::ChildPhase::kFailed) return Status::Aborted(state_.failure());
      supervise::ChildAction a = state_.Tick(Now());
      if (!a.event.empty()) Say(a.event);
      if (a.kind == supervise::ChildAction::Kind::kSpawn) TESSERA_RETURN_IF_ERROR(Spawn());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  bool signalled() const { return stop_ && stop_->load(); }

  Status ConnectEtcd() {
    etcd::EtcdOptions eo;
    eo.endpoints = Split(o_.etcd, ',');
    TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(eo));
    return Status::OK();
  }

  Status Spawn() {
    Say(fmt::format("{} on {}: starting {}", name_, o_.advertise.empty() ? "this host" : o_.advertise,
                    Join(program_.argv, " ")));
    TESSERA_ASSIGN_OR_RETURN(proc_, Process::Spawn(program_));
    state_.Spawned(Now());
    return Status::OK();
  }

  // A stop asked by a signal, by the launcher going (its stdin closed) or by the launcher's
  // order in etcd (checked twice a second). Every node hears at once; servers outlast the
  // trainers (which finish their step against them, as under `tessera local`) and etcd outlasts
  // them all. A signal asks for haste: no waiting.
  void WatchForStop() {
    if (!stop_reason_.empty()) return;
    if (signalled()) stop_reason_ = "a signal";
    if (o_.stop_on_eof && StdinClosed()) stop_reason_ = "its launcher is gone (stdin closed)";
    if (stop_reason_.empty() && o_.role != Role::kEtcd && Now() >= next_check_) {
      next_check_ = Now() + std::chrono::milliseconds(500);
      etcd::CallOptions quick;
      quick.retry_timeout = std::chrono::milliseconds(400);
      auto order = etcd_->Get(keys::LaunchStop(o_.job), {}, quick);
      if (order.ok() && !order->kvs.empty()) stop_reason_ = "the launcher (" + order->kvs[0].value + ")";
    }
    if (stop_reason_.empty()) return;
    Say(name_ + ": stopping, as asked by " + stop_reason_);
    if (o_.role != Role::kTrainer && !signalled()) drain_until_ = Now() + kDrainLimit;
  }

  // The program exited: what it registered is released now, not after its lease (as `tessera
  // local` does), and its state says what comes next.
  void Reap() {
    if (o_.role != Role::kEtcd) {
      auto n = supervise::RevokeLeasesOf(etcd_.get(), o_.job, proc_->pid());
      if (n.ok() && *n > 0) Say(fmt::format("{}: its registration released at once", name_));
    }
    supervise::ChildAction a = state_.Exited(proc_->exit_code().value_or(-1), Now());
    if (!a.event.empty()) Say(a.event);
  }

  const NodeOptions& o_;
  const std::atomic<bool>* stop_;
  const std::string name_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  ProcessOptions program_;
  std::unique_ptr<Cgroup> group_;
  supervise::ChildState state_;
  std::unique_ptr<Process> proc_;
  TimePoint next_check_ = Now();
  std::string stop_reason_;
  std::optional<TimePoint> drain_until_;
};

}  // namespace

Status RunNode(const NodeOptions& o, const std::atomic<bool>* stop) {
  NodeRun run(o, stop);
  TESSERA_RETURN_IF_ERROR(run.Prepare());
  TESSERA_RETURN_IF_ERROR(run.Start());
  return run.Supervise();
}

}  // namespace tessera::launch
