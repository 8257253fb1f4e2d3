// Supervisor (see supervisor_impl.h): setup, the main loop and rollback. It starts and signals
// processes, reads etcd, and drives each child's state machine with what it sees.
#include "local/supervisor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/exporter.h"
#include "client/master_client.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/flag_names.h"
#include "common/random.h"
#include "common/strings.h"
#include "coord/connection.h"
#include "coord/keys.h"
#include "job/job_access.h"
#include "job/job_store.h"
#include "local/child_commands.h"
#include "local/log_cause.h"
#include "local/preflight.h"
#include "local/rollback.h"
#include "local/supervisor_impl.h"
#include "supervise/progress_line.h"
#include "supervise/registrations.h"

namespace tessera::local {

namespace fs = std::filesystem;

namespace {

// The trainer as the user gave it: a built-in model's name, a --trainer-cmd's text, or the spec's
// command.
std::string TrainerShown(const spec::JobSpec& s) {
  return s.model.empty() ? spec::ShellLine(s.command) : s.model;
}

}  // namespace

Status Supervisor::StartEtcd() {
  if (o_.spec.external_etcd()) {
    etcd_endpoint_ = o_.given_etcd();
  } else {
    EtcdCommand cmd = EtcdArgv(o_);
    TESSERA_RETURN_IF_ERROR(Spawn(Add("etcd", Role::kEtcd, 0, std::move(cmd.argv))));
    etcd_endpoint_ = cmd.endpoint;
  }
  etcd::EtcdOptions eo;
  eo.endpoints = {etcd_endpoint_};
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(eo));
  // Our own etcd may take a while to start on a loaded machine; one given with --etcd is
  // either there or not.
  auto ping = etcd_->Ping(!o_.spec.external_etcd() ? std::chrono::seconds(30) : std::chrono::seconds(3));
  if (!ping.ok()) {
    if (o_.spec.external_etcd())
      return ping.status().WithContext("cannot reach the etcd given with --etcd " + o_.given_etcd());
    const std::string cause = CauseFromLog(TailLines(LogPath("etcd"), 60));
    return ping.status().WithContext("etcd did not come up (see " + LogPath("etcd") + ")" +
                                     (cause.empty() ? "" : "; its log says: " + cause));
  }
  if (o_.secure_etcd) TESSERA_RETURN_IF_ERROR(SecureEtcd().WithContext("securing the job's etcd"));
  return Status::OK();
}

Status Supervisor::SecureEtcd() {
  const std::string path = o_.run_dir + "/etcd-credentials";
  if (!o_.resume) {
    // etcd's root user, with a password nobody keeps: after this, only the job's user is used.
    TESSERA_RETURN_IF_ERROR(etcd_->UserAdd("root", NewUuid() + NewUuid()));
    if (Status r = etcd_->RoleAdd("root"); !r.ok() && r.code() != StatusCode::kAlreadyExists) return r;
    TESSERA_RETURN_IF_ERROR(etcd_->UserGrantRole("root", "root"));
    TESSERA_ASSIGN_OR_RETURN(JobEtcdUser user, CreateJobEtcdUser(etcd_.get(), o_.spec.name));
    TESSERA_RETURN_IF_ERROR(etcd_->AuthEnable());
    TESSERA_RETURN_IF_ERROR(WriteEtcdCredentials(path, user));
  }
  TESSERA_ASSIGN_OR_RETURN(JobEtcdUser user, ReadEtcdCredentials(path));
  etcd::EtcdOptions eo = etcd_->options();
  eo.username = user.user;
  eo.password = user.password;
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(eo));
  TESSERA_RETURN_IF_ERROR(etcd_->Ping(std::chrono::seconds(10)).status());
  etcd_env_[flags::kEnvEtcdCredentials] = path;
  return Status::OK();
}

Status Supervisor::CreateJob() {
  TESSERA_ASSIGN_OR_RETURN(job_, LocalJobConfig(o_));
  job_.token = NewUuid();
  job_.created_ms = WallMillis();
  secret_ = security::JobSecret::Generate();
  std::vector<etcd::Op> wanted = {
      etcd::Op::Put(keys::LocalTrainers(o_.spec.name), std::to_string(o_.spec.trainers_max))};
  if (elastic())
    wanted.push_back(etcd::Op::Put(keys::LocalPservers(o_.spec.name), std::to_string(StartPservers())));
  TESSERA_ASSIGN_OR_RETURN(auto r,
                           etcd_->Commit(CreateJobTxn(o_.spec.name, &job_, secret_, std::move(wanted))));
  if (!r.succeeded) {
    return Status::AlreadyExists("job '" + o_.spec.name + "' already exists in etcd at " + etcd_endpoint_ +
                                 " (pick another --job, or delete it with `tessera job delete`)");
  }
  return Status::OK();
}

Status Supervisor::Setup() {
  TESSERA_ASSIGN_OR_RETURN(auto lock, RunDirLock::Acquire(o_.run_dir));
  lock_.emplace(std::move(lock));
  // Processes are found and stopped by control group where this process may make one, by
  // process group otherwise (an unprivileged user's shell, or inside a platform job's sandbox,
  // whose own group and PID namespace already hold the whole job).
  auto cgroup = CreateSupervisorGroup("tessera-local-");
  if (cgroup.ok()) {
    cgroup_ = std::move(*cgroup);
  } else {
    spdlog::debug("children are stopped by process group: {}", cgroup.status().message());
  }
  if (o_.resume) {
    TESSERA_RETURN_IF_ERROR(
        CheckResumable(o_.run_dir, o_.spec.name, o_.spec.dataset, !o_.spec.external_etcd()));
  } else {
    TESSERA_RETURN_IF_ERROR(CheckNewRun(o_.run_dir));
  }
  std::error_code ec;
  fs::create_directories(o_.run_dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + o_.run_dir + "/logs: " + ec.message());
  TESSERA_RETURN_IF_ERROR(StartEtcd());
  if (o_.resume) {
    TESSERA_RETURN_IF_ERROR(CheckResumeCheckpoints(etcd_.get(), o_.spec.name, o_.run_dir));
    TESSERA_ASSIGN_OR_RETURN(auto cfg, etcd_->Get(keys::Config(o_.spec.name)));
    TESSERA_ASSIGN_OR_RETURN(job_, JobConfig::FromJson(cfg.kvs[0].value));
    TESSERA_ASSIGN_OR_RETURN(secret_, LoadJobSecret(etcd_.get(), o_.spec.name, job_));
    TESSERA_RETURN_IF_ERROR(
        etcd_->Put(keys::LocalTrainers(o_.spec.name), std::to_string(o_.spec.trainers_max)).status());
    if (elastic()) {
      TESSERA_RETURN_IF_ERROR(
          etcd_->Put(keys::LocalPservers(o_.spec.name), std::to_string(StartPservers())).status());
    }
    if (consistent()) {
      // Whatever the earlier run left registered is dead: free its indices and leadership now.
      TESSERA_RETURN_IF_ERROR(RevokeJobLeases(etcd_.get(), o_.spec.name));
      TESSERA_RETURN_IF_ERROR(OrderRollback());
    }
  } else {
    TESSERA_RETURN_IF_ERROR(CreateJob());
  }
  nlohmann::json run = {
      {"job", o_.spec.name},         {"etcd", etcd_endpoint_},     {"pid", static_cast<int64_t>(::getpid())},
      {"store", o_.spec.store.path}, {"dataset", o_.spec.dataset}, {"model_out", o_.model_out},
      {"started_ms", WallMillis()}};
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(o_.run_dir + "/run.json", run.dump(2)));
  // A resumed run loads the checkpoints it has, whatever this run's checkpoint flags say.
  pserver_checkpoints_ = o_.spec.checkpoint_every > 0 || consistent() || o_.resume;
  for (int p = 0; p < StartPservers(); ++p) TESSERA_RETURN_IF_ERROR(Spawn(AddPserver(p)));
  for (int m = 0; m < o_.spec.masters; ++m) {
    TESSERA_RETURN_IF_ERROR(
        Spawn(Add("master-" + std::to_string(m), Role::kMaster, m, MasterArgv(o_, etcd_endpoint_))));
  }
  for (int t = 0; t < o_.spec.trainers_max; ++t) TESSERA_RETURN_IF_ERROR(Spawn(AddTrainer(t)));
  console_.Event(fmt::format(
      "tessera local: job {} with {} pservers{}, {} trainers ({}), {} master{}; etcd {}; logs in {}/logs",
      o_.spec.name, StartPservers(),
      elastic() ? fmt::format(" (elastic: {} shards, 1..{} pservers)", job_.pservers, job_.pservers) : "",
      o_.spec.trainers_max, TrainerShown(o_.spec), o_.spec.masters,
      o_.spec.masters > 1 ? "s (standbys included)" : "", etcd_endpoint_, o_.run_dir));
  return Status::OK();
}

void Supervisor::ShowConsole() {
  std::string url = LeaderConsoleUrl(etcd_.get(), o_.spec.name);
  if (url.empty() || url == console_url_) return;
  console_url_ = url;
  console_.Event("web console: " + url);
}

Status Supervisor::OrderRollback() {
  std::string passed_over;
  TESSERA_ASSIGN_OR_RETURN(auto rb,
                           PrepareRollback(etcd_.get(), o_.spec.name, CheckpointDir(), &passed_over));
  if (!rb) {
    console_.Event(
        "no consistent checkpoint to roll back to yet: the job starts over from its initial state" +
        (passed_over.empty() ? std::string() : " (" + passed_over + ")"));
    return Status::OK();
  }
  console_.Event(fmt::format("rolling back to the consistent checkpoint of version {} (rollback {}){}{}",
                             rb->version, rb->generation,
                             rb->note.empty() ? "" : "; passed over: ", rb->note));
  return Status::OK();
}

void Supervisor::RollBackAndRestart(const std::string& why) {
  console_.Event(why + ": stopping the job to roll it back to its newest consistent checkpoint");
  for (auto& m : procs_) {
    if (m->role() != Role::kEtcd && m->proc) m->proc->Kill();
  }
  Status s = RevokeJobLeases(etcd_.get(), o_.spec.name);
  if (s.ok()) s = OrderRollback();
  if (!s.ok()) {
    failed_ = s.WithContext("rolling back");
    return;
  }
  for (Role role : {Role::kMaster, Role::kPserver, Role::kTrainer}) {
    for (auto& m : procs_) {
      if (m->role() != role || m->state.stopped()) continue;
      if (Status sp = Spawn(*m); !sp.ok()) {
        failed_ = sp.WithContext("restarting " + m->name());
        return;
      }
    }
  }
}

StatusOr<LocalResult> Supervisor::Run() {
  LocalResult result;
  if (Status s = Setup(); !s.ok()) {
    StopAll();
    return s;
  }
  master::MasterClient master(etcd_.get(), o_.spec.name, job_.token, secret_);
  TimePoint next_status = Now(), next_scale = Now(), next_registrations = Now();
  master::StatusReply last;
  bool finished = false;
  while (!(stop_ && stop_->load())) {
    Reap();
    if (!failed_.ok()) break;
    if (Now() >= next_registrations) {
      next_registrations = Now() + std::chrono::milliseconds(250);
      CheckRegistrations();
    }
    if (Now() >= next_scale) {
      next_scale = Now() + std::chrono::seconds(1);
      FollowScaleRequests();
    }
    if (o_.follow && !follow_stopped_ && stop_following_ && stop_following_->load()) {
      // The master reads the data set once more after it sees the key, then ends the job.
      if (etcd_->Put(keys::FollowStop(o_.spec.name), "{}").ok()) {
        follow_stopped_ = true;
        spdlog::info("no more data: the job ends once what landed in {} is trained on", o_.spec.dataset);
      }
    }
    if (Now() >= next_status) {
      next_status = Now() + std::chrono::milliseconds(500);
      ShowNotices();
      auto st = master.GetStatus(Deadline(std::chrono::milliseconds(400)));
      if (st.ok()) {
        ShowConsole();
        last = *st;
        finished = st->finished();
        console_.Progress(ProgressLine(last, Active(Role::kTrainer)));
      }
    }
    if (finished && AllTrainersDone()) {
      result.completed = true;
      break;
    }
    // Trainers that all ended before the job is done would leave it waiting for ever: after a
    // grace period (their last tasks' acknowledgements), the job has failed, saying why.
    if (!AllTrainersDone()) {
      trainers_done_at_.reset();
    } else if (!trainers_done_at_) {
      trainers_done_at_ = Now();
    } else if (Now() - *trainers_done_at_ > kTrainersDoneGrace) {
      failed_ = Status::Aborted(fmt::format(
          "every trainer exited with code 0, but the job is not done: {} samples trained, pass {} of {} ({} "
          "of "
          "{} tasks of this pass done). A trainer must read the job's data until none is left "
          "(tessera.reader() in Python, Session::Next in C++) before it exits; see {}",
          last.samples(), last.pass() + 1, last.passes(), last.done(), last.tasks(), LogPath("trainer-0")));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ShowNotices();
  console_.EndProgress();
  if (result.completed) {
    // The model, all shards merged, before the pservers go.
    result.model_path = o_.model_out.empty() ? o_.run_dir + "/model.tsm" : o_.model_out;
    auto st = master.GetStatus(Deadline(std::chrono::seconds(10)));
    if (st.ok()) last = *st;
    result.metrics = FinalMetrics(last);
    auto model = ExportModel(etcd_.get(), o_.spec.name, secret_, std::chrono::seconds(60));
    if (!model.ok()) {
      failed_ = model.status().WithContext("exporting the model");
    } else if (Status s = models::WriteModelFile(result.model_path, *model); !s.ok()) {
      failed_ = s;
    }
    nlohmann::json res = ResultJson(o_.spec.name, last, result.model_path);
    if (failed_.ok()) (void)WriteFileAtomic(o_.run_dir + "/result.json", res.dump(2));
  }
  StopAll();
  if (!failed_.ok()) return failed_;
  return result;
}

spec::JobSpec LocalJobSpec() {
  spec::JobSpec s;
  s.name = "local";
  s.masters = 1;
  s.checkpoint_every = 0;
  return s;
}

std::string LocalOptions::given_etcd() const { return Join(spec.etcd_endpoints, ","); }

std::string CheckpointDirOf(const LocalOptions& o) {
  return o.spec.checkpoints.path.empty() ? o.run_dir + "/checkpoints" : o.spec.checkpoints.path;
}

StatusOr<LocalResult> RunLocal(const LocalOptions& options, const std::atomic<bool>* stop,
                               const std::atomic<bool>* stop_following) {
  TESSERA_RETURN_IF_ERROR(CheckLocalOptions(options));
  Supervisor s(options, stop, stop_following);
  return s.Run();
}

}  // namespace tessera::local
