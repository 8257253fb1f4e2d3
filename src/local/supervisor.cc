// Supervisor (see supervisor.h).
#include "local/supervisor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "client/exporter.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/net.h"
#include "common/process.h"
#include "common/random.h"
#include "common/strings.h"
#include "coord/election.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "local/progress_line.h"
#include "local/terminal_console.h"
#include "local/restart_policy.h"
#include "local/rollback.h"
#include "master/master_client.h"

namespace tessera::local {
namespace {

namespace fs = std::filesystem;

struct Managed {
  std::string name;
  Role role;
  int slot = 0;
  ProcessOptions spec;
  std::unique_ptr<Process> proc;
  RestartPolicy policy;
  TimePoint started{};
  TimePoint restart_at{};
  bool waiting = false;   // exited, waiting to be restarted
  bool stopping = false;  // asked to stop: not restarted
  bool done = false;      // finished or stopped for good
  int restarts = 0;
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
  Status Spawn(Managed& m);
  void Reap();
  void Scale(int desired);
  int RunningTrainers() const;
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
  std::string console_url_;
  std::string CheckpointDir() const { return o_.run_dir + "/checkpoints"; }
  std::map<std::string, std::string> TrainerEnv(int slot) const;
  Managed& AddTrainer(int slot);

  LocalOptions o_;
  const std::atomic<bool>* stop_;
  TerminalConsole console_;
  std::string etcd_endpoint_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  JobConfig job_;
  std::vector<std::unique_ptr<Managed>> procs_;
  Status failed_;
};

std::string Log(const LocalOptions& o, const std::string& name) {
  return o.run_dir + "/logs/" + name + ".log";
}

Managed& Supervisor::Add(const std::string& name, Role role, int slot, std::vector<std::string> argv,
                         std::map<std::string, std::string> env) {
  auto m = std::make_unique<Managed>();
  m->name = name;
  m->role = role;
  m->slot = slot;
  m->spec.argv = std::move(argv);
  m->spec.env = std::move(env);
  m->spec.log_path = Log(o_, name);
  procs_.push_back(std::move(m));
  return *procs_.back();
}

Status Supervisor::Spawn(Managed& m) {
  TESSERA_ASSIGN_OR_RETURN(m.proc, Process::Spawn(m.spec));
  m.started = Now();
  m.waiting = false;
  return Status::OK();
}

Status Supervisor::StartEtcd() {
  if (!o_.etcd.empty()) {
    etcd_endpoint_ = o_.etcd;
  } else {
    int client = FreeLoopbackPort(), peer = FreeLoopbackPort();
    while (peer == client) peer = FreeLoopbackPort();
    std::string c = "http://127.0.0.1:" + std::to_string(client),
                p = "http://127.0.0.1:" + std::to_string(peer);
    Managed& m = Add(
        "etcd", Role::kEtcd, 0,
        {"/usr/bin/etcd", "--name=local", "--data-dir=" + o_.run_dir + "/etcd", "--listen-client-urls=" + c,
         "--advertise-client-urls=" + c, "--listen-peer-urls=" + p, "--initial-advertise-peer-urls=" + p,
         "--initial-cluster=local=" + p, "--logger=zap", "--log-level=warn"});
    TESSERA_RETURN_IF_ERROR(Spawn(m));
    etcd_endpoint_ = "127.0.0.1:" + std::to_string(client);
  }
  etcd::EtcdOptions eo;
  eo.endpoints = {etcd_endpoint_};
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(eo));
  auto ping = etcd_->Ping(std::chrono::seconds(30));
  if (!ping.ok()) return ping.status().WithContext("etcd did not come up (see " + Log(o_, "etcd") + ")");
  return Status::OK();
}

Status Supervisor::CreateJob() {
  job_.pservers = o_.pservers;
  TESSERA_ASSIGN_OR_RETURN(job_.mode, ConsistencyMode::Parse(o_.mode));
  TESSERA_ASSIGN_OR_RETURN(job_.optimizer, OptimizerConfig::Parse(o_.optimizer));
  job_.min_trainers = job_.mode.kind == ConsistencyMode::Kind::kAsync ? 1 : o_.trainers;
  job_.checkpoint_steps = o_.checkpoint_steps;
  job_.token = NewUuid();
  job_.created_ms = WallMillis();
  TESSERA_RETURN_IF_ERROR(job_.Validate());
  etcd::Txn txn;
  txn.compares.push_back(etcd::Compare::Absent(keys::Config(o_.job)));
  txn.success.push_back(etcd::Op::Put(keys::Config(o_.job), job_.ToJson()));
  txn.success.push_back(
      etcd::Op::Put(keys::SlotMap(o_.job), SlotMap::RoundRobin(job_.slots, job_.pservers).ToJson()));
  txn.success.push_back(etcd::Op::Put(keys::LocalTrainers(o_.job), std::to_string(o_.trainers)));
  TESSERA_ASSIGN_OR_RETURN(auto r, etcd_->Commit(txn));
  if (!r.succeeded) {
    return Status::AlreadyExists("job '" + o_.job + "' already exists in etcd at " + etcd_endpoint_ +
                                 " (pick another --job, or delete it with `tessera job delete`)");
  }
  return Status::OK();
}

std::map<std::string, std::string> Supervisor::TrainerEnv(int slot) const {
  std::map<std::string, std::string> env = {{"TESSERA_ETCD", etcd_endpoint_},
                                            {"TESSERA_JOB", o_.job},
                                            {"TESSERA_TRAINER_ID", std::to_string(slot)},
                                            {"TESSERA_STORE", o_.store},
                                            {"TESSERA_DATASET", o_.dataset},
                                            {"TESSERA_EVAL_DATASET", o_.eval_dataset},
                                            {"TESSERA_RUN_DIR", o_.run_dir},
                                            {"TESSERA_BATCH_SIZE", std::to_string(o_.batch_size)},
                                            {"TESSERA_LEASE_TTL", std::to_string(o_.lease_ttl_seconds)},
                                            {"TESSERA_TRANSPORT", o_.transport}};
  // `import tessera` in a trainer command finds the module built (or installed) beside this binary.
  fs::path bin = fs::path(o_.tessera_bin).parent_path();
  for (const fs::path& dir : {bin / "../python", bin / "../lib/tessera/python"}) {
    std::error_code ec;
    if (!fs::exists(dir / "tessera" / "__init__.py", ec)) continue;
    const char* old = std::getenv("PYTHONPATH");
    env["PYTHONPATH"] = fs::weakly_canonical(dir, ec).string() + (old && *old ? std::string(":") + old : "");
    break;
  }
  return env;
}

Managed& Supervisor::AddTrainer(int slot) {
  std::vector<std::string> argv;
  if (!o_.model.empty()) {
    argv = {o_.tessera_bin, "train",
            "--model",      o_.model,
            "--batch-size", std::to_string(o_.batch_size),
            "--lease-ttl",  std::to_string(o_.lease_ttl_seconds)};
    if (!o_.eval_dataset.empty()) {
      argv.push_back("--eval-dataset");
      argv.push_back(o_.eval_dataset);
    }
    for (const auto& a : o_.model_args) {
      argv.push_back("--model-arg");
      argv.push_back(a);
    }
  } else {
    argv = {"/bin/sh", "-c", o_.trainer_cmd};
  }
  Managed& m = Add("trainer-" + std::to_string(slot), Role::kTrainer, slot, argv, TrainerEnv(slot));
  m.spec.cwd = fs::current_path().string();
  return m;
}

Status Supervisor::Setup() {
  std::error_code ec;
  fs::create_directories(o_.run_dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create run directory '" + o_.run_dir + "': " + ec.message());
  if (!o_.resume && fs::exists(o_.run_dir + "/run.json")) {
    return Status::AlreadyExists(
        "run directory '" + o_.run_dir +
        "' was used by an earlier run; choose a new one, or continue it with --resume");
  }
  if (o_.resume) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(o_.run_dir + "/run.json"));
    auto prev = nlohmann::json::parse(text, nullptr, false);
    if (prev.is_discarded() || prev.value("job", "") != o_.job || prev.value("dataset", "") != o_.dataset) {
      return Status::InvalidArgument(
          "--resume: " + o_.run_dir + "/run.json is for job '" +
          (prev.is_discarded() ? "?" : prev.value("job", "?")) + "' on data set '" +
          (prev.is_discarded() ? "?" : prev.value("dataset", "?")) + "'; give the same --job and --dataset");
    }
    if (o_.etcd.empty() && !fs::exists(o_.run_dir + "/etcd")) {
      return Status::NotFound("--resume: " + o_.run_dir + "/etcd holds no etcd data to continue from");
    }
    if (o_.checkpoint_every <= 0 && o_.checkpoint_steps <= 0) {
      console_.Event(
          "warning: resuming without --checkpoint-every: the pservers start from fresh values while the "
          "master continues at its saved position");
    }
  }
  TESSERA_RETURN_IF_ERROR(StartEtcd());
  if (o_.resume) {
    TESSERA_ASSIGN_OR_RETURN(auto cfg, etcd_->Get(keys::Config(o_.job)));
    if (cfg.kvs.empty()) return Status::NotFound("--resume: job '" + o_.job + "' is not in the run's etcd");
    TESSERA_ASSIGN_OR_RETURN(job_, JobConfig::FromJson(cfg.kvs[0].value));
    (void)etcd_->Put(keys::LocalTrainers(o_.job), std::to_string(o_.trainers));
    (void)fs::remove(o_.run_dir + "/result.json", ec);
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
  const std::string ttl = std::to_string(o_.lease_ttl_seconds);
  for (int p = 0; p < o_.pservers; ++p) {
    std::vector<std::string> argv = {o_.tessera_bin, "pserver", "--etcd",      etcd_endpoint_, "--job",
                                     o_.job,         "--lease-ttl", ttl, "--transport", o_.transport};
    if (o_.checkpoint_every > 0 || consistent())
      argv.insert(argv.end(), {"--checkpoint-dir", CheckpointDir()});
    if (o_.checkpoint_every > 0)
      argv.insert(argv.end(), {"--checkpoint-every", fmt::format("{}", o_.checkpoint_every)});
    TESSERA_RETURN_IF_ERROR(Spawn(Add("pserver-" + std::to_string(p), Role::kPserver, p, argv)));
  }
  for (int m = 0; m <= o_.standby_masters; ++m) {
    TESSERA_RETURN_IF_ERROR(Spawn(Add("master-" + std::to_string(m), Role::kMaster, m,
                                      {o_.tessera_bin,
                                       "master",
                                       "--etcd",
                                       etcd_endpoint_,
                                       "--job",
                                       o_.job,
                                       "--store",
                                       o_.store,
                                       "--dataset",
                                       o_.dataset,
                                       "--passes",
                                       std::to_string(o_.passes),
                                       "--chunks-per-task",
                                       std::to_string(o_.chunks_per_task),
                                       "--task-timeout",
                                       std::to_string(o_.task_timeout_s),
                                       "--max-failures",
                                       std::to_string(o_.max_failures),
                                       "--lease-ttl",
                                       ttl,
                                       "--http-port",
                                       "0",
                                       "--log-dir",
                                       o_.run_dir + "/logs"})));
  }
  for (int t = 0; t < o_.trainers; ++t) TESSERA_RETURN_IF_ERROR(Spawn(AddTrainer(t)));
  console_.Event(fmt::format(
      "tessera local: job {} with {} pservers, {} trainers ({}), {}{} masters; etcd {}; logs in {}/logs",
      o_.job, o_.pservers, o_.trainers, o_.model.empty() ? o_.trainer_cmd : o_.model, 1 + o_.standby_masters,
      o_.standby_masters ? " (standbys included)" : "", etcd_endpoint_, o_.run_dir));
  return Status::OK();
}

void Supervisor::ShowConsole() {
  auto leader = Election::Leader(etcd_.get(), keys::MasterElectionPrefix(o_.job));
  if (!leader.ok() || !leader->has_value()) return;
  auto j = nlohmann::json::parse((*leader)->value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("console")) return;
  std::string url = j["console"].get<std::string>();
  if (url == console_url_) return;
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
    if (m->role == Role::kEtcd || !m->proc) continue;
    if (m->proc->running()) m->proc->Kill();
    (void)m->proc->Wait(std::chrono::seconds(10));
  }
  Status s = RevokeJobLeases(etcd_.get(), o_.job);
  if (s.ok()) s = OrderRollback();
  if (!s.ok()) {
    failed_ = s.WithContext("rolling back");
    return;
  }
  for (Role role : {Role::kMaster, Role::kPserver, Role::kTrainer}) {
    for (auto& m : procs_) {
      if (m->role != role || m->stopping) continue;
      m->done = m->waiting = false;
      if (Status sp = Spawn(*m); !sp.ok()) {
        failed_ = sp.WithContext("restarting " + m->name);
        return;
      }
    }
  }
}

void Supervisor::Reap() {
  for (auto& mp : procs_) {
    Managed& m = *mp;
    if (m.done) continue;
    if (m.waiting) {
      if (Now() >= m.restart_at) {
        Status s = Spawn(m);
        if (!s.ok()) failed_ = s.WithContext("restarting " + m.name);
        ++m.restarts;
      }
      continue;
    }
    if (!m.proc || m.proc->running()) continue;
    int code = m.proc->exit_code().value_or(-1);
    auto uptime = std::chrono::duration_cast<std::chrono::milliseconds>(Now() - m.started);
    Decision d = m.policy.OnExit(m.role, code, uptime, m.stopping);
    switch (d.kind) {
      case Decision::Kind::kDone:
        m.done = true;
        if (!m.stopping) console_.Event(m.name + " " + d.reason);
        break;
      case Decision::Kind::kGiveUp:
        m.done = true;
        failed_ = Status::Aborted(m.name + ": " + d.reason + " (see " + m.spec.log_path + ")");
        break;
      case Decision::Kind::kRestart:
        if (m.role == Role::kPserver && consistent()) {
          RollBackAndRestart(m.name + " " + d.reason);
          return;
        }
        m.waiting = true;
        m.restart_at = Now() + d.delay;
        console_.Event(
            fmt::format("{} {}; restarting it in {:.1f} s", m.name, d.reason, d.delay.count() / 1000.0));
        break;
    }
  }
}

int Supervisor::RunningTrainers() const {
  int n = 0;
  for (const auto& m : procs_) n += m->role == Role::kTrainer && !m->done && !m->stopping;
  return n;
}

bool Supervisor::AllTrainersDone() const {
  bool any = false;
  for (const auto& m : procs_) {
    if (m->role != Role::kTrainer || m->stopping) continue;
    any = true;
    if (!m->done) return false;
  }
  return any;
}

void Supervisor::Scale(int desired) {
  int running = RunningTrainers();
  if (desired == running || desired < 0) return;
  if (desired > running) {
    // New trainers take the lowest free slots (ids).
    std::set<int> used;
    for (const auto& m : procs_) {
      if (m->role == Role::kTrainer && !m->done && !m->stopping) used.insert(m->slot);
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
  // Fewer: stop the highest slots gracefully (they finish their step and acknowledge).
  std::vector<Managed*> active;
  for (auto& m : procs_) {
    if (m->role == Role::kTrainer && !m->done && !m->stopping) active.push_back(m.get());
  }
  std::sort(active.begin(), active.end(), [](Managed* a, Managed* b) { return a->slot > b->slot; });
  for (int i = 0; i < running - desired; ++i) {
    active[i]->stopping = true;
    if (active[i]->proc && active[i]->proc->running()) (void)active[i]->proc->Signal(SIGTERM);
    if (active[i]->waiting) active[i]->done = true;
    console_.Event(fmt::format("scaled down: stopping {} ({} trainers)", active[i]->name, desired));
  }
}

void Supervisor::StopRole(Role role, std::chrono::milliseconds grace) {
  for (auto& m : procs_) {
    if (m->role != role) continue;
    m->stopping = true;
    if (m->proc && m->proc->running()) (void)m->proc->Signal(SIGTERM);
  }
  auto deadline = Now() + grace;
  for (auto& m : procs_) {
    if (m->role != role || !m->proc) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Now());
    if (!m->proc->Wait(std::max(left, std::chrono::milliseconds(1)))) m->proc->Kill();
    m->done = true;
  }
}

void Supervisor::StopAll() {
  StopRole(Role::kTrainer, std::chrono::seconds(15));
  StopRole(Role::kMaster, std::chrono::seconds(10));
  StopRole(Role::kPserver, std::chrono::seconds(10));
  StopRole(Role::kEtcd, std::chrono::seconds(10));
}

StatusOr<LocalResult> Supervisor::Run() {
  LocalResult result;
  if (Status s = Setup(); !s.ok()) {
    StopAll();
    return s;
  }
  master::MasterClient master(etcd_.get(), o_.job, job_.token);
  TimePoint next_status = Now(), next_scale = Now();
  int64_t scale_revision = 0;
  master::StatusReply last;
  bool finished = false;
  while (!(stop_ && stop_->load())) {
    Reap();
    if (!failed_.ok()) break;
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
        console_.Progress(ProgressLine(last, RunningTrainers()));
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
    auto model = ExportModel(etcd_.get(), o_.job, std::chrono::seconds(60));
    if (!model.ok()) {
      failed_ = model.status().WithContext("exporting the model");
    } else if (Status s = models::WriteModelFile(result.model_path, *model); !s.ok()) {
      failed_ = s;
    }
    nlohmann::json res = {{"job", o_.job},
                          {"passes", last.passes()},
                          {"tasks", last.tasks()},
                          {"failed_tasks", last.failed()},
                          {"samples", last.samples()},
                          {"model", result.model_path},
                          {"summary", result.metrics}};
    auto metrics = nlohmann::json::object();
    for (const auto& m : last.metrics()) metrics[m.name()] = m.value();  // the latest pass wins
    res["metrics"] = metrics;
    (void)WriteFileAtomic(o_.run_dir + "/result.json", res.dump(2));
  }
  StopAll();
  if (!failed_.ok()) return failed_;
  return result;
}

}  // namespace

StatusOr<LocalResult> RunLocal(const LocalOptions& options, const std::atomic<bool>* stop) {
  if (options.model.empty() == options.trainer_cmd.empty()) {
    return Status::InvalidArgument("give either --model NAME or --trainer-cmd CMD");
  }
  if (options.pservers < 1 || options.trainers < 1)
    return Status::InvalidArgument("need at least 1 pserver and 1 trainer");
  if (options.store.empty() || options.dataset.empty())
    return Status::InvalidArgument("need --store and --dataset");
  TESSERA_RETURN_IF_ERROR(ValidateName(options.job, "job"));
  Supervisor s(options, stop);
  return s.Run();
}

}  // namespace tessera::local
