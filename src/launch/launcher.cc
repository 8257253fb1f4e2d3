// Launcher (see launcher.h, launcher_impl.h): the shell that starts etcd and the nodes, watches
// the job through etcd and the master, and stops everything in order. Here: preparing, the dry
// run, creating the job and the main loop.
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
#include "job/job_config.h"
#include "job/job_store.h"
#include "launch/hosts_file.h"
#include "launch/launcher_impl.h"
#include "launch/plan.h"
#include "spec/job_spec.h"
#include "spec/spec_settings.h"
#include "supervise/progress_line.h"
#include "supervise/registrations.h"
#include "supervise/run_dir.h"
#include "supervise/terminal_console.h"
#include "tessera/model_file.h"
namespace tessera::launch {

namespace fs = std::filesystem;

Status Launcher::Prepare() {
  // The text with the settings applied is what the nodes read from etcd.
  TESSERA_ASSIGN_OR_RETURN(auto file, spec::LoadSpecFile(o_.spec_path, o_.spec_settings));
  spec_text_ = std::move(file.text);
  spec_ = std::move(file.spec);
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

StatusOr<LaunchResult> Launcher::Run() {
  TESSERA_RETURN_IF_ERROR(Prepare());
  if (o_.dry_run) {
    TESSERA_RETURN_IF_ERROR(DryRun());
    return LaunchResult{};
  }
  TESSERA_RETURN_IF_ERROR(OpenRunDir());
  if (!o_.hosts_file.empty()) TESSERA_RETURN_IF_ERROR(PreflightSsh());
  TESSERA_RETURN_IF_ERROR(StartEtcd());
  TESSERA_RETURN_IF_ERROR(CreateJob());
  TESSERA_RETURN_IF_ERROR(ReadJob());
  nlohmann::json run = {{"job", spec_.name},
                        {"etcd", etcd_endpoint_},
                        {"spec", fs::absolute(o_.spec_path).string()},
                        {"engine", o_.mpi ? "mpi" : "ssh"},
                        {"pid", static_cast<int64_t>(::getpid())},
                        {"model_out", o_.model_out},
                        {"started_ms", WallMillis()}};
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(o_.run_dir + "/run.json", run.dump(2)));
  TESSERA_RETURN_IF_ERROR(StartNodes());

  master::MasterClient master(etcd_.get(), spec_.name, job_.token, secret_, tls_);
  LaunchResult result;
  result.run_dir = o_.run_dir;
  Status failed = FollowProgress(master, &result);
  console_.EndProgress();
  if (result.completed) failed = Finish(master, &result);
  console_.Event(result.completed ? "the job is done: stopping its nodes" : "stopping the job's nodes");
  StopEverything(result.completed ? "finished" : (failed.ok() ? "stopped" : "failed"));
  if (!failed.ok()) return failed;
  return result;
}

Status Launcher::OpenRunDir() {
  TESSERA_ASSIGN_OR_RETURN(auto lock, supervise::RunDirLock::Acquire(o_.run_dir));
  lock_.emplace(std::move(lock));
  TESSERA_RETURN_IF_ERROR(supervise::CheckNewRun(o_.run_dir));
  std::error_code ec;
  if (fs::exists(o_.model_out, ec)) {
    return Status::AlreadyExists(o_.model_out +
                                 " exists; a launch never overwrites a model (move it, or give --model-out)");
  }
  fs::create_directories(o_.run_dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + o_.run_dir + "/logs: " + ec.message());
  return Status::OK();
}

Status Launcher::ReadJob() {
  TESSERA_ASSIGN_OR_RETURN(auto cfg, etcd_->Get(keys::Config(spec_.name)));
  if (cfg.kvs.empty()) return Status::NotFound("job '" + spec_.name + "' vanished from etcd");
  TESSERA_ASSIGN_OR_RETURN(job_, JobConfig::FromJson(cfg.kvs[0].value));
  TESSERA_ASSIGN_OR_RETURN(secret_, LoadJobSecret(etcd_.get(), spec_.name, job_));
  // A --tls job's certificates (tls.path, on this host as on every other): the launcher follows
  // the master and exports the model over TLS like any process of the job.
  const spec::JobSpec::TlsFiles tls_files = spec_.Tls();
  TESSERA_ASSIGN_OR_RETURN(tls_, LoadJobTls(spec_.name, job_, tls_files.ca, tls_files.cert, tls_files.key));
  return Status::OK();
}

Status Launcher::FollowProgress(master::MasterClient& master, LaunchResult* result) {
  std::string console_url;
  TimePoint finished_since{};
  bool finished = false;
  // Twice a second until stopped, done or failed.
  while (!(stop_ && stop_->load())) {
    TESSERA_RETURN_IF_ERROR(CheckStarted());
    auto st = master.GetStatus(Deadline(std::chrono::milliseconds(800)));
    if (st.ok()) {
      last_ = *st;
      if (std::string url = supervise::LeaderConsoleUrl(etcd_.get(), spec_.name);
          !url.empty() && url != console_url) {
        console_url = url;
        console_.Event("web console: " + url);
      }
      etcd::GetOptions count;
      count.prefix = true;
      count.count_only = true;
      auto trainers = etcd_->Get(keys::TrainerPrefix(spec_.name), count);
      const int registered = trainers.ok() ? static_cast<int>(trainers->count) : -1;
      console_.Progress(supervise::ProgressLine(last_, std::max(registered, 0)));
      // Done: every pass, and the trainers have left (they deregister as they finish).
      const bool now_finished = st->finished() && registered == 0;
      if (now_finished && !finished) finished_since = Now();
      finished = now_finished;
      if (finished && Now() - finished_since >= std::chrono::seconds(1)) {
        result->completed = true;
        return Status::OK();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return Status::OK();
}

Status Launcher::Finish(master::MasterClient& master, LaunchResult* result) {
  result->model_path = o_.model_out;
  auto st = master.GetStatus(Deadline(std::chrono::seconds(10)));
  if (st.ok()) last_ = *st;
  result->metrics = supervise::FinalMetrics(last_);
  auto model = ExportModel(etcd_.get(), spec_.name, secret_, std::chrono::seconds(60), tls_);
  if (!model.ok()) return model.status().WithContext("exporting the model");
  TESSERA_RETURN_IF_ERROR(models::WriteModelFile(result->model_path, *model));
  return WriteFileAtomic(o_.run_dir + "/result.json",
                         supervise::ResultJson(spec_.name, last_, result->model_path).dump(2));
}

StatusOr<LaunchResult> RunLaunch(const LaunchOptions& o, const std::atomic<bool>* stop) {
  if (o.mpi == !o.hosts_file.empty())
    return Status::InvalidArgument("give one of --mpi (one mpirun) and --hosts FILE (ssh)");
  Launcher l(o, stop);
  return l.Run();
}

}  // namespace tessera::launch
