// Launcher (see launcher.h): the shell that starts etcd and the nodes, watches the job through
// etcd and the master, and stops everything in order.
#include "launch/launcher.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "client/exporter.h"
#include "client/master_client.h"
#include "common/addressing.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/flag_names.h"
#include "common/net.h"
#include "common/process.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "deploy/job_spec.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "launch/hosts_file.h"
#include "launch/plan.h"
#include "local/progress_line.h"
#include "local/registrations.h"
#include "local/run_dir.h"
#include "local/terminal_console.h"
#include "tessera/model_file.h"

namespace tessera::launch {
namespace {

namespace fs = std::filesystem;
using local::Role;

constexpr std::chrono::seconds kNodesStopWait{40};  // a node's own grace (15 s) and its etcd poll
constexpr std::chrono::seconds kEtcdStopWait{20};

std::string Quoted(const std::vector<std::string>& argv) {
  std::vector<std::string> q;
  for (const auto& a : argv) q.push_back(ShellQuote(a));
  return Join(q, " ");
}

// A launched process on this machine: mpirun, an ssh client, or etcd's node.
struct Started {
  std::string name;   // "pserver-0", "mpirun", "etcd"
  std::string where;  // "on 10.0.0.2", "here"
  Role role = Role::kTrainer;
  bool is_mpirun = false;
  std::unique_ptr<Process> proc;
  bool ended = false;
};

class Launcher {
 public:
  Launcher(LaunchOptions o, const std::atomic<bool>* stop)
      : o_(std::move(o)), stop_(stop), console_(o_.progress_tty) {}
  ~Launcher() { StopEverything("stopped"); }

  StatusOr<LaunchResult> Run();

 private:
  Status Prepare();
  Status DryRun();
  Status StartEtcd();
  Status CreateJob();
  Status StartNodes();
  Status PreflightSsh();
  std::vector<std::string> SshArgv(const HostEntry& h, const std::string& remote_command) const;
  std::vector<std::string> RemoteNode(const NodeArgsOptions& n) const;
  NodeArgsOptions SshNode(const NodePlan& p) const;
  MpiOptions Mpi() const;
  Started& Spawn(const std::string& name, const std::string& where, Role role, std::vector<std::string> argv,
                 bool stdin_pipe);
  // A launched process that ended before it was asked to: the job fails, with its log's end.
  Status CheckStarted();
  // Orders every node to stop (`why` in etcd), waits for them, then forces; etcd last.
  void StopEverything(const std::string& why);
  std::string LogPath(const std::string& name) const { return o_.run_dir + "/logs/" + name + ".log"; }
  std::string Tail(const std::string& name) const;
  bool external_etcd() const { return !o_.etcd.empty() || spec_.external_etcd(); }

  LaunchOptions o_;
  const std::atomic<bool>* stop_;
  local::TerminalConsole console_;
  std::optional<local::RunDirLock> lock_;
  deploy::JobSpec spec_;
  std::string spec_text_;
  std::vector<HostEntry> hosts_;
  std::vector<NodePlan> plan_;
  std::string etcd_endpoint_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::vector<std::unique_ptr<Started>> started_;  // etcd (if ours) first
  bool stopping_ = false;
  bool stopped_ = false;
};

Status Launcher::Prepare() {
  TESSERA_ASSIGN_OR_RETURN(spec_text_, ReadFile(o_.spec_path));
  TESSERA_ASSIGN_OR_RETURN(spec_, deploy::ParseJobSpec(spec_text_, o_.spec_path));
  if (spec_.model.empty() && spec_.command.empty())
    return Status::InvalidArgument(o_.spec_path + ": train: give a model or a command for the trainers");
  if (!o_.etcd.empty()) {
    TESSERA_ASSIGN_OR_RETURN(auto eps, ParseEndpoints(o_.etcd));
    etcd_endpoint_ = Join(eps, ",");
  } else if (spec_.external_etcd()) {
    etcd_endpoint_ = spec_.EtcdText();
  }
  if (!o_.hosts_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(hosts_, LoadHostsFile(o_.hosts_file));
    TESSERA_ASSIGN_OR_RETURN(plan_, PlaceNodes(spec_, hosts_, !external_etcd(), o_.hosts_file));
    if (!external_etcd()) {
      const HostEntry& h = hosts_[plan_[0].host];
      etcd_endpoint_ = JoinHostPort(h.address, o_.etcd_port);
    }
  } else if (!external_etcd()) {
    std::string host = o_.etcd_host;
    if (host.empty() && !o_.mpi_hostfile.empty()) {
      auto hostfile = ReadFile(o_.mpi_hostfile);
      if (!hostfile.ok()) return hostfile.status().WithContext("reading the MPI hostfile");
      const std::string first = FirstHostInHostfile(*hostfile);
      if (first.empty()) return Status::InvalidArgument(o_.mpi_hostfile + ": no hosts in the MPI hostfile");
      if (!IsLoopbackHost(first) && first != "localhost") {
        auto src = SourceAddressToward(JoinHostPort(first, 22));
        if (!src.ok()) {
          return src.status().WithContext(
              "choosing the address the ranks reach this machine's etcd at (give " +
              std::string("--etcd-host, or --etcd)"));
        }
        host = *src;
      }
    }
    if (host.empty()) host = "127.0.0.1";
    const int port = FreePortPair();
    if (port == 0) return Status::Unavailable("no two free neighbouring ports for etcd on this machine");
    etcd_endpoint_ = JoinHostPort(host, port);
  }
  if (o_.remote_tessera.empty()) o_.remote_tessera = o_.tessera_bin;
  if (o_.mpi) {
    auto mpirun = FindProgram(o_.mpirun);
    if (!mpirun.ok()) {
      return mpirun.status().WithContext(
          "--mpi needs Open MPI's mpirun (Debian: apt-get install openmpi-bin; or give --mpirun)");
    }
    o_.mpirun = *mpirun;
  } else {
    auto ssh = FindProgram(o_.ssh);
    if (!ssh.ok())
      return ssh.status().WithContext("--hosts needs an ssh client (Debian: apt-get install openssh-client)");
    o_.ssh = *ssh;
  }
  if (o_.run_dir.empty()) o_.run_dir = "runs/" + spec_.name + "-" + std::to_string(::getpid());
  o_.run_dir = fs::absolute(o_.run_dir).lexically_normal().string();
  if (o_.model_out.empty()) o_.model_out = o_.run_dir + "/model.tsm";
  return Status::OK();
}

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

Status Launcher::DryRun() {
  std::printf("# tessera launch --dry-run: job %s, etcd %s%s\n", spec_.name.c_str(), etcd_endpoint_.c_str(),
              external_etcd() ? "" : " (started by the launcher)");
  std::printf("# then: tessera job create --etcd %s --job %s %s\n", etcd_endpoint_.c_str(),
              spec_.name.c_str(), Join(spec_.JobCreateArgs(), " ").c_str());
  std::printf("# and the spec is stored under %s, which every node reads\n",
              keys::LaunchSpec(spec_.name).c_str());
  if (o_.mpi) {
    std::printf("%s\n", Quoted(MpirunArgv(spec_, Mpi())).c_str());
    return Status::OK();
  }
  for (const NodePlan& p : plan_) {
    const HostEntry& h = hosts_[p.host];
    NodeArgsOptions n = SshNode(p);
    if (p.role == Role::kEtcd) n.data_dir = o_.remote_dir + "/" + spec_.name + "-etcd";
    std::printf("# %s on %s\n%s\n", p.Name().c_str(), h.Destination().c_str(),
                Quoted(SshArgv(h, "exec " + Quoted(RemoteNode(n)))).c_str());
  }
  return Status::OK();
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

Status Launcher::CreateJob() {
  auto stopped = etcd_->Get(keys::LaunchStop(spec_.name));
  if (!stopped.ok()) return stopped.status();
  if (!stopped->kvs.empty()) {
    return Status::AlreadyExists(fmt::format(
        "job '{}' in etcd at {} was launched before and ended ({}); pick another name in {}, or remove it "
        "with "
        "`tessera job delete --etcd {} --job {}`",
        spec_.name, etcd_endpoint_, stopped->kvs[0].value, o_.spec_path, etcd_endpoint_, spec_.name));
  }
  ProcessOptions po;
  po.argv = {o_.tessera_bin, "job", "create", flags::kEtcd, etcd_endpoint_, flags::kJob, spec_.name};
  for (const auto& a : spec_.JobCreateArgs()) po.argv.push_back(a);
  po.log_path = LogPath("job-create");
  TESSERA_ASSIGN_OR_RETURN(auto p, Process::Spawn(po));
  auto code = p->Wait(std::chrono::seconds(60));
  if (!code || *code != 0) return Status::FailedPrecondition("creating the job failed" + Tail("job-create"));
  console_.Event(std::string(Trim(p->Output().substr(p->Output().rfind("\n", p->Output().size() - 2) + 1))));
  return etcd_->Put(keys::LaunchSpec(spec_.name), spec_text_).status();
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

StatusOr<LaunchResult> Launcher::Run() {
  TESSERA_RETURN_IF_ERROR(Prepare());
  if (o_.dry_run) {
    TESSERA_RETURN_IF_ERROR(DryRun());
    return LaunchResult{};
  }
  TESSERA_ASSIGN_OR_RETURN(auto lock, local::RunDirLock::Acquire(o_.run_dir));
  lock_.emplace(std::move(lock));
  TESSERA_RETURN_IF_ERROR(local::CheckNewRun(o_.run_dir));
  std::error_code ec;
  if (fs::exists(o_.model_out, ec)) {
    return Status::AlreadyExists(o_.model_out +
                                 " exists; a launch never overwrites a model (move it, or give --model-out)");
  }
  fs::create_directories(o_.run_dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + o_.run_dir + "/logs: " + ec.message());
  if (!o_.hosts_file.empty()) TESSERA_RETURN_IF_ERROR(PreflightSsh());
  TESSERA_RETURN_IF_ERROR(StartEtcd());
  TESSERA_RETURN_IF_ERROR(CreateJob());
  TESSERA_ASSIGN_OR_RETURN(auto cfg, etcd_->Get(keys::Config(spec_.name)));
  if (cfg.kvs.empty()) return Status::NotFound("job '" + spec_.name + "' vanished from etcd");
  TESSERA_ASSIGN_OR_RETURN(JobConfig job, JobConfig::FromJson(cfg.kvs[0].value));
  TESSERA_ASSIGN_OR_RETURN(const security::JobSecret secret, LoadJobSecret(etcd_.get(), spec_.name, job));
  // A --tls job's certificates (tls.path, on this host as on every other): the launcher follows
  // the master and exports the model over TLS like any process of the job.
  const deploy::JobSpec::TlsFiles tls_files = spec_.Tls();
  TESSERA_ASSIGN_OR_RETURN(auto tls,
                           LoadJobTls(spec_.name, job, tls_files.ca, tls_files.cert, tls_files.key));
  nlohmann::json run = {{"job", spec_.name},
                        {"etcd", etcd_endpoint_},
                        {"spec", fs::absolute(o_.spec_path).string()},
                        {"engine", o_.mpi ? "mpi" : "ssh"},
                        {"pid", static_cast<int64_t>(::getpid())},
                        {"model_out", o_.model_out},
                        {"started_ms", WallMillis()}};
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(o_.run_dir + "/run.json", run.dump(2)));
  TESSERA_RETURN_IF_ERROR(StartNodes());

  master::MasterClient master(etcd_.get(), spec_.name, job.token, secret, tls);
  master::StatusReply last;
  std::string console_url;
  LaunchResult result;
  result.run_dir = o_.run_dir;
  Status failed;
  TimePoint finished_since{};
  bool finished = false;
  while (!(stop_ && stop_->load())) {
    if (failed = CheckStarted(); !failed.ok()) break;
    auto st = master.GetStatus(Deadline(std::chrono::milliseconds(800)));
    if (st.ok()) {
      last = *st;
      if (std::string url = local::LeaderConsoleUrl(etcd_.get(), spec_.name);
          !url.empty() && url != console_url) {
        console_url = url;
        console_.Event("web console: " + url);
      }
      etcd::GetOptions count;
      count.prefix = true;
      count.count_only = true;
      auto trainers = etcd_->Get(keys::TrainerPrefix(spec_.name), count);
      const int registered = trainers.ok() ? static_cast<int>(trainers->count) : -1;
      console_.Progress(local::ProgressLine(last, std::max(registered, 0)));
      // Done: every pass, and the trainers have left (they deregister as they finish).
      const bool now_finished = st->finished() && registered == 0;
      if (now_finished && !finished) finished_since = Now();
      finished = now_finished;
      if (finished && Now() - finished_since >= std::chrono::seconds(1)) {
        result.completed = true;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  console_.EndProgress();
  if (result.completed) {
    result.model_path = o_.model_out;
    auto st = master.GetStatus(Deadline(std::chrono::seconds(10)));
    if (st.ok()) last = *st;
    result.metrics = local::FinalMetrics(last);
    auto model = ExportModel(etcd_.get(), spec_.name, secret, std::chrono::seconds(60), tls);
    if (!model.ok()) {
      failed = model.status().WithContext("exporting the model");
    } else {
      failed = models::WriteModelFile(result.model_path, *model);
    }
    if (failed.ok())
      failed = WriteFileAtomic(o_.run_dir + "/result.json",
                               local::ResultJson(spec_.name, last, result.model_path).dump(2));
  }
  console_.Event(result.completed ? "the job is done: stopping its nodes" : "stopping the job's nodes");
  StopEverything(result.completed ? "finished" : (failed.ok() ? "stopped" : "failed"));
  if (!failed.ok()) return failed;
  return result;
}

}  // namespace

StatusOr<LaunchResult> RunLaunch(const LaunchOptions& o, const std::atomic<bool>* stop) {
  if (o.mpi == !o.hosts_file.empty())
    return Status::InvalidArgument("give one of --mpi (one mpirun) and --hosts FILE (ssh)");
  Launcher l(o, stop);
  return l.Run();
}

}  // namespace tessera::launch
