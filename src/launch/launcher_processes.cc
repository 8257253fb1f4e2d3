// Launcher's processes (see launcher_impl.h): etcd and the nodes started over ssh or in one
// mpirun, checked while they run, and stopped in order.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "common/process.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "launch/hosts_file.h"
#include "launch/launcher_impl.h"
#include "launch/plan.h"
#include "spec/job_spec.h"
#include "supervise/run_dir.h"
#include "supervise/terminal_console.h"
namespace tessera::launch {

namespace fs = std::filesystem;

std::vector<std::string> Launcher::SshArgv(const HostEntry& h, const std::string& remote_command) const {
  return SshCommand({o_.ssh, o_.ssh_options, o_.ssh_identity}, h, remote_command);
}

std::vector<std::string> Launcher::RemoteNode(const NodeArgsOptions& n) const {
  std::vector<std::string> argv = {o_.remote_tessera};
  for (auto& a : NodeArgs(n)) argv.push_back(std::move(a));
  return argv;
}

NodeArgsOptions Launcher::SshNode(const NodePlan& p) const {
  NodeArgsOptions n;
  n.role = p.role;
  n.etcd = etcd_endpoint_;
  n.job = spec_.name;
  n.index = p.index;
  n.advertise = hosts_[p.host].address;
  n.stop_on_eof = true;
  n.host_processes = ProcessesOnHost(plan_, p.host);
  return n;
}

MpiOptions Launcher::Mpi() const {
  MpiOptions m;
  m.mpirun = o_.mpirun;
  m.tessera = o_.tessera_bin;
  m.etcd = etcd_endpoint_;
  m.job = spec_.name;
  m.hostfile = o_.mpi_hostfile;
  m.as_root = ::geteuid() == 0;
  m.extra = o_.mpirun_args;
  return m;
}

Started& Launcher::Spawn(const std::string& name, const std::string& where, Role role,
                         std::vector<std::string> argv, bool stdin_pipe) {
  auto s = std::make_unique<Started>();
  s->name = name;
  s->where = where;
  s->role = role;
  ProcessOptions po;
  po.argv = std::move(argv);
  po.log_path = LogPath(name);
  po.stdin_pipe = stdin_pipe;
  if (std::FILE* f = std::fopen(po.log_path.c_str(), "ae")) {
    std::fprintf(f, "==== tessera launch: %s\n", Quoted(po.argv).c_str());
    std::fclose(f);
  }
  auto p = Process::Spawn(po);
  if (p.ok()) {
    s->proc = std::move(*p);
  } else {
    s->ended = true;
    console_.Event(name + ": " + p.status().ToString());
  }
  started_.push_back(std::move(s));
  return *started_.back();
}

Status Launcher::PreflightSsh() {
  // Every host at once: reachable over ssh, and the program is there.
  std::vector<std::unique_ptr<Process>> checks;
  for (const HostEntry& h : hosts_) {
    ProcessOptions po;
    po.argv = SshArgv(h, "test -x " + ShellQuote(o_.remote_tessera) + " || { echo 'no program " +
                             o_.remote_tessera + " on this host (--remote-tessera)' >&2; exit 127; }");
    po.log_path = LogPath("ssh-check-" + h.address);
    TESSERA_ASSIGN_OR_RETURN(auto p, Process::Spawn(po));
    checks.push_back(std::move(p));
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    auto code = checks[i]->Wait(std::chrono::seconds(30));
    if (code && *code == 0) continue;
    std::string out(Trim(checks[i]->Output()));
    return Status::Unavailable(fmt::format(
        "{}:{}: cannot run on {} over ssh{}: {}", o_.hosts_file, hosts_[i].line, hosts_[i].Destination(),
        code ? "" : " (no answer in 30 s)", out.empty() ? "(no message)" : out));
  }
  return Status::OK();
}

Status Launcher::StartEtcd() {
  if (!external_etcd()) {
    NodeArgsOptions n;
    n.role = Role::kEtcd;
    n.etcd = etcd_endpoint_;
    n.job = spec_.name;
    n.stop_on_eof = true;
    if (o_.mpi) {
      n.data_dir = o_.run_dir + "/etcd";
      std::vector<std::string> argv = {o_.tessera_bin};
      for (auto& a : NodeArgs(n)) argv.push_back(std::move(a));
      Spawn("etcd", "here", Role::kEtcd, std::move(argv), true);
    } else {
      const HostEntry& h = hosts_[plan_[0].host];
      n.data_dir = fmt::format("{}/{}-{}-etcd", o_.remote_dir, spec_.name, ::getpid());
      Spawn("etcd", "on " + h.address, Role::kEtcd, SshArgv(h, "exec " + Quoted(RemoteNode(n))), true);
    }
  }
  etcd::EtcdOptions eo;
  eo.endpoints = Split(etcd_endpoint_, ',');
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(eo));
  auto ping = etcd_->Ping(external_etcd() ? std::chrono::seconds(5) : std::chrono::seconds(60));
  if (!ping.ok()) {
    if (external_etcd()) return ping.status().WithContext("cannot reach etcd at " + etcd_endpoint_);
    return ping.status().WithContext("etcd did not come up at " + etcd_endpoint_ + Tail("etcd"));
  }
  console_.Event("etcd at " + etcd_endpoint_ + (external_etcd() ? "" : " (started for this job)"));
  return Status::OK();
}

Status Launcher::StartNodes() {
  if (o_.mpi) {
    Started& s = Spawn("mpirun", "here", Role::kTrainer, MpirunArgv(spec_, Mpi()), false);
    s.is_mpirun = true;
    console_.Event(fmt::format("mpirun: {} masters, {} pservers, {} trainers as ranks; output in {}",
                               spec_.masters, spec_.pservers, spec_.trainers_max, LogPath("mpirun")));
    return s.ended ? Status::Unavailable("cannot start mpirun") : Status::OK();
  }
  for (const NodePlan& p : plan_) {
    if (p.role == Role::kEtcd) continue;
    const HostEntry& h = hosts_[p.host];
    NodeArgsOptions n = SshNode(p);
    Spawn(p.Name(), "on " + h.address, p.role, SshArgv(h, "exec " + Quoted(RemoteNode(n))), true);
  }
  console_.Event(fmt::format("started {} nodes over ssh on {} hosts; logs in {}/logs", plan_.size(),
                             hosts_.size(), o_.run_dir));
  return Status::OK();
}

std::string Launcher::Tail(const std::string& name) const {
  std::string shown;
  for (const auto& line : Split(TailLines(LogPath(name), 15), '\n')) shown += "\n  | " + line;
  return ". The end of " + LogPath(name) + ":" + (shown.empty() ? "\n  | (empty)" : shown);
}

Status Launcher::CheckStarted() {
  for (auto& s : started_) {
    if (s->ended || !s->proc || s->proc->running()) continue;
    s->ended = true;
    const int code = s->proc->exit_code().value_or(-1);
    if (s->role == Role::kTrainer && !s->is_mpirun && code == 0) {
      console_.Event(s->name + " " + s->where + " finished");
      continue;
    }
    if (s->is_mpirun) {
      // mpirun names the first rank that failed; its own lines say why, not the others' stopping.
      auto output = ReadFile(LogPath("mpirun"));
      if (std::string why = output.ok() ? FailedRankLines(*output) : ""; !why.empty()) {
        return Status::Aborted(fmt::format("mpirun ended with code {}: {}\n(all ranks' output: {})", code,
                                           why, LogPath("mpirun")));
      }
    }
    std::string what = code == 255 && !s->is_mpirun ? " (ssh could not reach its host, or lost it)" : "";
    return Status::Aborted(
        fmt::format("{} {} ended with code {}{}{}", s->name, s->where, code, what, Tail(s->name)));
  }
  return Status::OK();
}

void Launcher::StopEverything(const std::string& why) {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (etcd_) {
    etcd::CallOptions quick;
    quick.retry_timeout = std::chrono::seconds(3);
    (void)etcd_->Put(keys::LaunchStop(spec_.name), why, {}, quick);
  }
  auto wait_all = [&](bool etcd_role, std::chrono::seconds limit) {
    const Deadline d(limit);
    for (bool left = true; left && !d.expired();) {
      left = false;
      for (auto& s : started_)
        left = left || (s->proc && (s->role == Role::kEtcd) == etcd_role && s->proc->running());
      if (left) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  // The nodes stop on the order in etcd; what is left after the wait is made to (an ssh client
  // that goes closes its node's stdin; mpirun passes SIGTERM to its ranks).
  wait_all(false, etcd_ ? kNodesStopWait : std::chrono::seconds(0));
  for (auto& s : started_) {
    if (s->proc && s->role != Role::kEtcd && s->proc->running()) {
      s->proc->CloseStdin();
      s->proc->Stop(std::chrono::seconds(15));
    }
  }
  wait_all(false, std::chrono::seconds(30));
  for (auto& s : started_) {
    if (s->proc && s->role == Role::kEtcd) s->proc->CloseStdin();
  }
  wait_all(true, kEtcdStopWait);
  for (auto& s : started_) {
    if (s->proc) s->proc->Kill();
  }
}

}  // namespace tessera::launch
