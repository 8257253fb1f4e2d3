// Supervisor (see supervisor.h): the shell around ChildState. It starts and signals processes,
// reads etcd, and drives each child's state machine with what it sees.
#include "local/supervisor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "client/exporter.h"
#include "client/master_client.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/process.h"
#include "common/random.h"
#include "common/strings.h"
#include "coord/election.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "local/child_commands.h"
#include "local/child_state.h"
#include "local/preflight.h"
#include "local/progress_line.h"
#include "local/registrations.h"
#include "local/rollback.h"
#include "local/run_dir.h"
#include "local/terminal_console.h"

namespace tessera::local {
namespace {

namespace fs = std::filesystem;

// How long a child asked to stop may take before SIGKILL.
constexpr std::chrono::seconds kTrainerStopGrace{15};
constexpr std::chrono::seconds kServerStopGrace{10};

struct Managed {
  Managed(std::string n, Role r, int s) : state(std::move(n), r), slot(s) {}
  ChildState state;
  int slot = 0;
  ProcessOptions spec;
  std::unique_ptr<Process> proc;
  const std::string& name() const { return state.name(); }
  Role role() const { return state.role(); }
};

class Supervisor {
 public:
  Supervisor(LocalOptions o, const std::atomic<bool>* stop)
      : o_(std::move(o)), stop_(stop), console_(o_.progress_tty) {}
  ~Supervisor() { StopAll(); }

  StatusOr<LocalResult> Run();

 private:
  Status Setup();
  Status StartEtcd();
  Status CreateJob();
  Managed& Add(const std::string& name, Role role, int slot, std::vector<std::string> argv,
               std::map<std::string, std::string> env = {});
  Managed& AddTrainer(int slot);
  Status Spawn(Managed& m);
  // Reaps exited children and runs what their state machines say (restarts, kills, give-ups).
  void Reap();
  // A child is gone (exited, or killed by us): what it registered in etcd is released now, so
  // its index, tasks or leadership pass on at once rather than after its lease's TTL.
  void ReleaseRegistrations(const Managed& m, pid_t pid);
  void Exited(Managed& m, int code);
  // Tells each running child whether etcd still holds its registration.
  void CheckRegistrations();
  void Scale(int desired);
  int ActiveTrainers() const;
  bool AllTrainersDone() const;
  void StopRole(Role role, std::chrono::milliseconds grace);
  void StopAll();
  // A pserver of a job with consistent checkpoints was lost: every process of the job stops,
  // the job is rolled back to its newest consistent checkpoint, and everything starts again.
  void RollBackAndRestart(const std::string& why);
  // Picks the rollback version and orders it (nothing of the job may run).
  Status OrderRollback();
  bool consistent() const { return job_.checkpoint_steps > 0; }
  // Prints the leading master's console address when it is new.
  void ShowConsole();
  std::string CheckpointDir() const { return o_.run_dir + "/checkpoints"; }
  std::string LogPath(const std::string& name) const { return o_.run_dir + "/logs/" + name + ".log"; }

  LocalOptions o_;
  const std::atomic<bool>* stop_;
  TerminalConsole console_;
  std::optional<RunDirLock> lock_;
  std::string console_url_;
  std::string etcd_endpoint_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  JobConfig job_;
  security::JobSecret secret_;  // the job's (made with it, or read back on --resume)
  std::vector<std::unique_ptr<Managed>> procs_;
  // Children killed because they froze, until they are reaped (a process in uninterruptible
  // sleep dies only when it wakes).
  std::vector<std::unique_ptr<Process>> graveyard_;
  Status failed_;
};

Managed& Supervisor::Add(const std::string& name, Role role, int slot, std::vector<std::string> argv,
                         std::map<std::string, std::string> env) {
  auto m = std::make_unique<Managed>(name, role, slot);
  m->spec.argv = std::move(argv);
  m->spec.env = std::move(env);
  m->spec.log_path = LogPath(name);
  procs_.push_back(std::move(m));
  return *procs_.back();
}

Managed& Supervisor::AddTrainer(int slot) {
  Managed& m = Add("trainer-" + std::to_string(slot), Role::kTrainer, slot, TrainerArgv(o_),
                   TrainerEnv(o_, etcd_endpoint_, slot));
  m.spec.cwd = fs::current_path().string();
  return m;
}

// Each start of a child is marked in its log, so what a failed run printed can be told from
// what earlier runs did.
constexpr char kStartMark[] = "==== tessera local: started ";

Status Supervisor::Spawn(Managed& m) {
  if (std::FILE* f = std::fopen(m.spec.log_path.c_str(), "ae")) {
    std::fprintf(f, "%s%s (start %d)\n", kStartMark, m.name().c_str(), m.state.starts() + 1);
    std::fclose(f);
  }
  TESSERA_ASSIGN_OR_RETURN(m.proc, Process::Spawn(m.spec));
  m.state.Spawned(Now());
  return Status::OK();
}

Status Supervisor::StartEtcd() {
  if (!o_.etcd.empty()) {
    etcd_endpoint_ = o_.etcd;
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
  auto ping = etcd_->Ping(o_.etcd.empty() ? std::chrono::seconds(30) : std::chrono::seconds(3));
  if (!ping.ok()) {
    if (!o_.etcd.empty())
      return ping.status().WithContext("cannot reach the etcd given with --etcd " + o_.etcd);
    return ping.status().WithContext("etcd did not come up (see " + LogPath("etcd") + ")");
  }
  return Status::OK();
}

Status Supervisor::CreateJob() {
  TESSERA_ASSIGN_OR_RETURN(job_, LocalJobConfig(o_));
  job_.token = NewUuid();
  job_.created_ms = WallMillis();
  secret_ = security::JobSecret::Generate();
  TESSERA_ASSIGN_OR_RETURN(
      auto r,
      etcd_->Commit(CreateJobTxn(o_.job, &job_, secret_,
                                 {etcd::Op::Put(keys::LocalTrainers(o_.job), std::to_string(o_.trainers))})));
  if (!r.succeeded) {
    return Status::AlreadyExists("job '" + o_.job + "' already exists in etcd at " + etcd_endpoint_ +
                                 " (pick another --job, or delete it with `tessera job delete`)");
  }
  return Status::OK();
}

Status Supervisor::Setup() {
  TESSERA_ASSIGN_OR_RETURN(auto lock, RunDirLock::Acquire(o_.run_dir));
  lock_.emplace(std::move(lock));
  if (o_.resume) {
    TESSERA_RETURN_IF_ERROR(CheckResumable(o_.run_dir, o_.job, o_.dataset, o_.etcd.empty()));
  } else {
    TESSERA_RETURN_IF_ERROR(CheckNewRun(o_.run_dir));
  }
  std::error_code ec;
  fs::create_directories(o_.run_dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + o_.run_dir + "/logs: " + ec.message());
  TESSERA_RETURN_IF_ERROR(StartEtcd());
  if (o_.resume) {
    TESSERA_RETURN_IF_ERROR(CheckResumeCheckpoints(etcd_.get(), o_.job, o_.run_dir));
    TESSERA_ASSIGN_OR_RETURN(auto cfg, etcd_->Get(keys::Config(o_.job)));
    TESSERA_ASSIGN_OR_RETURN(job_, JobConfig::FromJson(cfg.kvs[0].value));
    TESSERA_ASSIGN_OR_RETURN(secret_, LoadJobSecret(etcd_.get(), o_.job, job_));
    TESSERA_RETURN_IF_ERROR(etcd_->Put(keys::LocalTrainers(o_.job), std::to_string(o_.trainers)).status());
    if (consistent()) {
      // Whatever the earlier run left registered is dead: free its indices and leadership now.
      TESSERA_RETURN_IF_ERROR(RevokeJobLeases(etcd_.get(), o_.job));
      TESSERA_RETURN_IF_ERROR(OrderRollback());
    }
  } else {
    TESSERA_RETURN_IF_ERROR(CreateJob());
  }
  nlohmann::json run = {{"job", o_.job},
                        {"etcd", etcd_endpoint_},
                        {"pid", static_cast<int64_t>(::getpid())},
                        {"store", o_.store},
                        {"dataset", o_.dataset},
                        {"model_out", o_.model_out},
                        {"started_ms", WallMillis()}};
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(o_.run_dir + "/run.json", run.dump(2)));
  // A resumed run loads the checkpoints it has, whatever this run's checkpoint flags say.
  const bool checkpoints = o_.checkpoint_every > 0 || consistent() || o_.resume;
  for (int p = 0; p < o_.pservers; ++p) {
    TESSERA_RETURN_IF_ERROR(Spawn(Add("pserver-" + std::to_string(p), Role::kPserver, p,
                                      PserverArgv(o_, etcd_endpoint_, checkpoints, p))));
  }
  for (int m = 0; m <= o_.standby_masters; ++m) {
    TESSERA_RETURN_IF_ERROR(
        Spawn(Add("master-" + std::to_string(m), Role::kMaster, m, MasterArgv(o_, etcd_endpoint_))));
  }
  for (int t = 0; t < o_.trainers; ++t) TESSERA_RETURN_IF_ERROR(Spawn(AddTrainer(t)));
  console_.Event(fmt::format(
      "tessera local: job {} with {} pservers, {} trainers ({}), {} master{}; etcd {}; logs in {}/logs",
      o_.job, o_.pservers, o_.trainers, o_.model.empty() ? o_.trainer_cmd : o_.model, 1 + o_.standby_masters,
      o_.standby_masters ? "s (standbys included)" : "", etcd_endpoint_, o_.run_dir));
  return Status::OK();
}

void Supervisor::ShowConsole() {
  std::string url = LeaderConsoleUrl(etcd_.get(), o_.job);
  if (url.empty() || url == console_url_) return;
  console_url_ = url;
  console_.Event("web console: " + url);
}

Status Supervisor::OrderRollback() {
  TESSERA_ASSIGN_OR_RETURN(auto rb, PrepareRollback(etcd_.get(), o_.job, CheckpointDir()));
  if (!rb) {
    console_.Event(
        "no consistent checkpoint to roll back to yet: the job starts over from its initial state");
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
  Status s = RevokeJobLeases(etcd_.get(), o_.job);
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

void Supervisor::Exited(Managed& m, int code) {
  ChildAction a = m.state.Exited(code, Now());
  if (!a.event.empty()) console_.Event(a.event);
  if (m.state.phase() == ChildPhase::kFailed) {
    // The last run's lines (after its start mark), at most 15.
    std::string tail = TailLines(m.spec.log_path, 15);
    if (size_t mark = tail.rfind(kStartMark); mark != std::string::npos) {
      size_t eol = tail.find('\n', mark);
      tail = eol == std::string::npos ? "" : tail.substr(eol + 1);
    }
    std::string shown;
    for (const auto& line : Split(tail, '\n')) shown += "\n  | " + line;
    failed_ = Status::Aborted(m.state.failure() + ". The end of its log (" + m.spec.log_path +
                              "):" + (shown.empty() ? "\n  | (empty)" : shown));
  } else if (m.state.phase() == ChildPhase::kBackoff && m.role() == Role::kPserver && consistent() &&
             !job_.hosted()) {
    // With replicas a backup takes the lost pserver's shards over: nothing is rolled back.
    RollBackAndRestart(m.name() + " was lost");
  }
}

void Supervisor::ReleaseRegistrations(const Managed& m, pid_t pid) {
  if (m.role() == Role::kEtcd || pid <= 0) return;
  auto n = RevokeLeasesOf(etcd_.get(), o_.job, pid);
  if (!n.ok()) {
    spdlog::warn("could not release the registrations of {} (pid {}): {}", m.name(), pid,
                 n.status().message());
  } else if (*n > 0) {
    console_.Event(
        fmt::format("{} (pid {}) is gone: its registration released at once, not after its {} s lease",
                    m.name(), pid, o_.lease_ttl_seconds));
  }
}

void Supervisor::Reap() {
  std::erase_if(graveyard_, [](const std::unique_ptr<Process>& p) { return !p->running(); });
  const TimePoint now = Now();
  for (size_t i = 0; i < procs_.size() && failed_.ok(); ++i) {
    Managed& m = *procs_[i];
    if (m.state.alive() && m.proc && !m.proc->running()) {
      ReleaseRegistrations(m, m.proc->pid());
      Exited(m, m.proc->exit_code().value_or(-1));
      if (!failed_.ok()) return;
    }
    ChildAction a = m.state.Tick(now);
    if (!a.event.empty()) console_.Event(a.event);
    if (a.kind == ChildAction::Kind::kSpawn) {
      if (Status s = Spawn(m); !s.ok()) failed_ = s.WithContext("restarting " + m.name());
    } else if (a.kind == ChildAction::Kind::kKill) {
      // SIGKILL works on a stopped process at once; one stuck in the kernel dies when it wakes.
      // Its replacement does not wait for that: the old one is fenced (its lease is gone).
      m.proc->KillNoWait();
      int code = m.proc->running() ? 128 + SIGKILL : m.proc->exit_code().value_or(128 + SIGKILL);
      const pid_t pid = m.proc->pid();
      graveyard_.push_back(std::move(m.proc));
      ReleaseRegistrations(m, pid);
      Exited(m, code);
    }
  }
}

void Supervisor::CheckRegistrations() {
  auto regs = ReadRegistrations(etcd_.get(), o_.job);
  if (!regs.ok()) return;  // etcd unreachable: judge nobody
  const TimePoint now = Now();
  for (auto& m : procs_) {
    if (m->role() == Role::kEtcd || m->state.phase() != ChildPhase::kRunning || !m->proc) continue;
    const int64_t pid = m->proc->pid();
    if (regs->registered.count(pid)) {
      m->state.Registered(now);
    } else if (!regs->left.count(pid)) {
      m->state.NotRegistered(now);
    }
  }
}

int Supervisor::ActiveTrainers() const {
  int n = 0;
  for (const auto& m : procs_) n += m->role() == Role::kTrainer && m->state.active();
  return n;
}

bool Supervisor::AllTrainersDone() const {
  bool any = false;
  for (const auto& m : procs_) {
    if (m->role() != Role::kTrainer || m->state.stopped()) continue;
    any = true;
    if (!m->state.finished()) return false;
  }
  return any;
}

void Supervisor::Scale(int desired) {
  int running = ActiveTrainers();
  if (desired == running || desired < 0) return;
  if (desired > running) {
    // New trainers take the lowest free slots (ids).
    std::set<int> used;
    for (const auto& m : procs_) {
      if (m->role() == Role::kTrainer && (m->state.active() || m->state.alive())) used.insert(m->slot);
    }
    for (int slot = 0; running < desired; ++slot) {
      if (used.count(slot)) continue;
      Managed& m = AddTrainer(slot);
      if (Status s = Spawn(m); !s.ok()) {
        failed_ = s;
        return;
      }
      ++running;
      console_.Event(fmt::format("scaled up: started trainer-{} ({} trainers)", slot, running));
    }
    return;
  }
  // Fewer: stop the highest slots (they finish their step, acknowledge and deregister; SIGKILL
  // after the grace period).
  std::vector<Managed*> active;
  for (auto& m : procs_) {
    if (m->role() == Role::kTrainer && m->state.active()) active.push_back(m.get());
  }
  std::sort(active.begin(), active.end(), [](Managed* a, Managed* b) { return a->slot > b->slot; });
  for (int i = 0; i < running - desired; ++i) {
    if (active[i]->state.Stop().kind == ChildAction::Kind::kTerminate)
      active[i]->proc->Stop(kTrainerStopGrace);
    console_.Event(fmt::format("scaled down: stopping {} ({} trainers)", active[i]->name(), desired));
  }
}

void Supervisor::StopRole(Role role, std::chrono::milliseconds grace) {
  for (auto& m : procs_) {
    if (m->role() != role) continue;
    if (m->state.Stop().kind == ChildAction::Kind::kTerminate && m->proc) m->proc->Stop(grace);
  }
  // Process::running() escalates to SIGKILL once the grace period is over.
  const auto deadline = Now() + grace + std::chrono::seconds(30);
  for (bool left = true; left && Now() < deadline;) {
    left = false;
    for (auto& m : procs_) {
      if (m->role() != role || !m->proc) continue;
      if (m->proc->running()) {
        left = true;
      } else if (m->state.alive()) {
        (void)m->state.Exited(m->proc->exit_code().value_or(-1), Now());
      }
    }
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Supervisor::StopAll() {
  StopRole(Role::kTrainer, kTrainerStopGrace);
  StopRole(Role::kMaster, kServerStopGrace);
  StopRole(Role::kPserver, kServerStopGrace);
  StopRole(Role::kEtcd, kServerStopGrace);
  for (auto& p : graveyard_) p->Kill();
  graveyard_.clear();
}

StatusOr<LocalResult> Supervisor::Run() {
  LocalResult result;
  if (Status s = Setup(); !s.ok()) {
    StopAll();
    return s;
  }
  master::MasterClient master(etcd_.get(), o_.job, job_.token, secret_);
  TimePoint next_status = Now(), next_scale = Now(), next_registrations = Now();
  int64_t scale_revision = 0;
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
      etcd::CallOptions quick;
      quick.retry_timeout = std::chrono::milliseconds(500);
      auto want = etcd_->Get(keys::LocalTrainers(o_.job), {}, quick);
      // Only a change of the wanted count scales (trainers that finished are not replaced).
      if (want.ok() && !want->kvs.empty() && want->kvs[0].mod_revision != scale_revision) {
        scale_revision = want->kvs[0].mod_revision;
        auto n = ParseInt64(want->kvs[0].value, "trainers");
        if (n.ok() && *n >= 0 && *n <= 1000) Scale(static_cast<int>(*n));
      }
    }
    if (Now() >= next_status) {
      next_status = Now() + std::chrono::milliseconds(500);
      auto st = master.GetStatus(Deadline(std::chrono::milliseconds(400)));
      if (st.ok()) {
        ShowConsole();
        last = *st;
        finished = st->finished();
        console_.Progress(ProgressLine(last, ActiveTrainers()));
      }
    }
    if (finished && AllTrainersDone()) {
      result.completed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  console_.EndProgress();
  if (result.completed) {
    // The model, all shards merged, before the pservers go.
    result.model_path = o_.model_out.empty() ? o_.run_dir + "/model.tsm" : o_.model_out;
    auto st = master.GetStatus(Deadline(std::chrono::seconds(10)));
    if (st.ok()) last = *st;
    result.metrics = FinalMetrics(last);
    auto model = ExportModel(etcd_.get(), o_.job, secret_, std::chrono::seconds(60));
    if (!model.ok()) {
      failed_ = model.status().WithContext("exporting the model");
    } else if (Status s = models::WriteModelFile(result.model_path, *model); !s.ok()) {
      failed_ = s;
    }
    nlohmann::json res = ResultJson(o_.job, last, result.model_path);
    if (failed_.ok()) (void)WriteFileAtomic(o_.run_dir + "/result.json", res.dump(2));
  }
  StopAll();
  if (!failed_.ok()) return failed_;
  return result;
}

}  // namespace

StatusOr<LocalResult> RunLocal(const LocalOptions& options, const std::atomic<bool>* stop) {
  TESSERA_RETURN_IF_ERROR(CheckLocalOptions(options));
  Supervisor s(options, stop);
  return s.Run();
}

}  // namespace tessera::local
