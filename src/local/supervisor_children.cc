// Supervisor's children (see supervisor_impl.h): adding, spawning, reaping and stopping them,
// and releasing in etcd what a dead child held.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "common/strings.h"
#include "local/child_commands.h"
#include "local/log_cause.h"
#include "local/supervisor_impl.h"
#include "supervise/registrations.h"

namespace tessera::local {

namespace fs = std::filesystem;

// Each start of a child is marked in its log, so what a failed run printed can be told from
// what earlier runs did.
constexpr char kStartMark[] = "==== tessera local: started ";

Managed& Supervisor::Add(const std::string& name, Role role, int slot, std::vector<std::string> argv,
                         std::map<std::string, std::string> env) {
  auto m = std::make_unique<Managed>(name, role, slot);
  m->spec.argv = std::move(argv);
  m->spec.env = std::move(env);
  if (role != Role::kEtcd) m->spec.env.insert(etcd_env_.begin(), etcd_env_.end());
  m->spec.log_path = LogPath(name);
  m->spec.cgroup_parent = cgroup_.get();
  procs_.push_back(std::move(m));
  return *procs_.back();
}

Managed& Supervisor::AddTrainer(int slot) {
  Managed& m = Add("trainer-" + std::to_string(slot), Role::kTrainer, slot, TrainerArgv(o_),
                   TrainerEnv(o_, etcd_endpoint_, slot));
  m.spec.cwd = fs::current_path().string();
  return m;
}

Managed& Supervisor::AddPserver(int slot) {
  return Add("pserver-" + std::to_string(slot), Role::kPserver, slot,
             PserverArgv(o_, etcd_endpoint_, pserver_checkpoints_, slot));
}

Status Supervisor::Spawn(Managed& m) {
  if (std::FILE* f = std::fopen(m.spec.log_path.c_str(), "ae")) {
    std::fprintf(f, "%s%s (start %d)\n", kStartMark, m.name().c_str(), m.state.starts() + 1);
    std::fclose(f);
  }
  TESSERA_ASSIGN_OR_RETURN(m.proc, Process::Spawn(m.spec));
  m.state.Spawned(Now());
  return Status::OK();
}

void Supervisor::Exited(Managed& m, int code) {
  ChildAction a = m.state.Exited(code, Now());
  // A process that failed by itself (not by a signal) usually said why in its log.
  if (!a.event.empty() && code > 0 && code < 128) {
    if (std::string cause = CauseFromLog(TailLines(m.spec.log_path, 60)); !cause.empty())
      a.event += ": " + cause;
  }
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
  auto n = RevokeLeasesOf(etcd_.get(), o_.spec.name, pid);
  if (!n.ok()) {
    spdlog::warn("could not release the registrations of {} (pid {}): {}", m.name(), pid,
                 n.status().message());
  } else if (*n > 0) {
    console_.Event(
        fmt::format("{} (pid {}) is gone: its registration released at once, not after its {} s lease",
                    m.name(), pid, o_.spec.lease_ttl));
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
  auto regs = ReadRegistrations(etcd_.get(), o_.spec.name);
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

int Supervisor::Active(Role role) const {
  int n = 0;
  for (const auto& m : procs_) n += m->role() == role && m->state.active();
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
  if (cgroup_) {
    // Whatever a child left that outlived it (none should: each child's end kills its group).
    if (Status s = cgroup_->Kill(std::chrono::seconds(10)); !s.ok()) spdlog::warn("{}", s.message());
    if (cgroup_->Remove().ok()) cgroup_.reset();
  }
}

}  // namespace tessera::local
