// Supervisor (see supervisor.h): the class behind RunLocal, shared by its files —
// supervisor.cc (setup, the main loop, rollback), supervisor_children.cc (starting, reaping and
// stopping children) and supervisor_scale.cc (trainers and pservers added or removed on request).
// Internal to local/.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cgroup.h"
#include "common/process.h"
#include "coord/etcd_client.h"
#include "job/job_config.h"
#include "local/log_notices.h"
#include "local/supervisor.h"
#include "security/job_secret.h"
#include "supervise/child_state.h"
#include "supervise/progress_line.h"
#include "supervise/registrations.h"
#include "supervise/run_dir.h"
#include "supervise/terminal_console.h"

namespace tessera::local {

// The supervisor's parts shared with `tessera launch` (src/supervise), by their short names here.
using supervise::CheckNewRun;
using supervise::CheckResumable;
using supervise::CheckResumeCheckpoints;
using supervise::ChildAction;
using supervise::ChildOptions;
using supervise::ChildPhase;
using supervise::ChildState;
using supervise::FinalMetrics;
using supervise::JobRegistrations;
using supervise::LeaderConsoleUrl;
using supervise::ProgressLine;
using supervise::ReadRegistrations;
using supervise::RestartOptions;
using supervise::RestartPolicy;
using supervise::ResultJson;
using supervise::RevokeLeasesOf;
using supervise::Role;
using supervise::RoleName;
using supervise::RunDirLock;
using supervise::TerminalConsole;

// How long a child asked to stop may take before SIGKILL.
inline constexpr std::chrono::seconds kTrainerStopGrace{15};
inline constexpr std::chrono::seconds kServerStopGrace{10};
// A pserver removed from an elastic job hands its shards over before it exits (the node gives
// that 60 s).
inline constexpr std::chrono::seconds kPserverDrainGrace{90};
// Trainers that have all exited with code 0 while the master still has work: how long the
// supervisor waits for the master to see their last acknowledgements before the job fails.
inline constexpr std::chrono::seconds kTrainersDoneGrace{10};

// One child process and its state machine.
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
  Supervisor(LocalOptions o, const std::atomic<bool>* stop, const std::atomic<bool>* stop_following)
      : o_(std::move(o)), stop_(stop), stop_following_(stop_following), console_(o_.progress_tty) {}
  ~Supervisor() { StopAll(); }

  StatusOr<LocalResult> Run();

 private:
  // supervisor.cc
  Status Setup();
  Status StartEtcd();
  // --secure-etcd: authentication on in the etcd just started, and a user of the job's own for
  // every process (this one included, from then on).
  Status SecureEtcd();
  Status CreateJob();
  // A pserver of a job with consistent checkpoints was lost: every process of the job stops,
  // the job is rolled back to its newest consistent checkpoint, and everything starts again.
  void RollBackAndRestart(const std::string& why);
  // Picks the rollback version and orders it (nothing of the job may run).
  Status OrderRollback();
  // Prints the leading master's console address when it is new.
  void ShowConsole();

  // supervisor_notices.cc
  // Shows on the terminal what the children's logs marked for it since the last call
  // (common/logging.h, kNoticeMark): "trainer-0: pserver 1 restarted without its parameters...".
  void ShowNotices();

  // supervisor_children.cc
  Managed& Add(const std::string& name, Role role, int slot, std::vector<std::string> argv,
               std::map<std::string, std::string> env = {});
  Managed& AddTrainer(int slot);
  Managed& AddPserver(int slot);
  Status Spawn(Managed& m);
  // Reaps exited children and runs what their state machines say (restarts, kills, give-ups).
  void Reap();
  // A child is gone (exited, or killed by us): what it registered in etcd is released now, so
  // its index, tasks or leadership pass on at once rather than after its lease's TTL.
  void ReleaseRegistrations(const Managed& m, pid_t pid);
  void Exited(Managed& m, int code);
  // Tells each running child whether etcd still holds its registration.
  void CheckRegistrations();
  // Children of `role` that are wanted (running or to be restarted).
  int Active(Role role) const;
  bool AllTrainersDone() const;
  void StopRole(Role role, std::chrono::milliseconds grace);
  void StopAll();

  // supervisor_scale.cc
  // Reads the wanted numbers of trainers and pservers (`tessera local scale`) and follows a
  // change of either.
  void FollowScaleRequests();
  void ScaleTrainers(int desired);
  void ScalePservers(int desired);
  // The slots (ids) of children of `role` to add (the lowest free ones) or to stop (the
  // highest active ones) to reach `desired`, and the events to print.
  void Scale(Role role, int desired);

  bool consistent() const { return job_.checkpoint_steps > 0; }
  bool elastic() const { return job_.initial_pservers > 0; }
  // The pserver processes started: all of the job's pservers, or an elastic job's first ones.
  int StartPservers() const {
    if (!elastic()) return o_.spec.pservers;
    return o_.spec.start_pservers > 0 ? o_.spec.start_pservers : job_.initial_pservers;
  }
  std::string CheckpointDir() const { return CheckpointDirOf(o_); }
  std::string LogPath(const std::string& name) const { return o_.run_dir + "/logs/" + name + ".log"; }

  LocalOptions o_;
  const std::atomic<bool>* stop_;
  const std::atomic<bool>* stop_following_;
  bool follow_stopped_ = false;  // the job's follow/stop key is written
  TerminalConsole console_;
  std::optional<RunDirLock> lock_;
  std::string console_url_;
  std::string etcd_endpoint_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  JobConfig job_;
  security::JobSecret secret_;  // the job's (made with it, or read back on --resume)
  // The job's control group, where this process may make one (root, or a delegated group): every
  // child runs in a group of its own below it, so what a child leaves behind, a daemon outside
  // its process group included, ends with it. Declared before the children, which borrow it.
  std::unique_ptr<Cgroup> cgroup_;
  std::vector<std::unique_ptr<Managed>> procs_;
  // Children killed because they froze, until they are reaped (a process in uninterruptible
  // sleep dies only when it wakes).
  std::vector<std::unique_ptr<Process>> graveyard_;
  Status failed_;
  bool pserver_checkpoints_ = false;                       // pservers get --checkpoint-dir
  int64_t trainers_revision_ = 0, pservers_revision_ = 0;  // of the scale keys last followed
  std::string scale_file_text_;                            // of o_.scale_file, as last followed
  std::optional<TimePoint> trainers_done_at_;              // when every trainer was seen done
  std::map<std::string, std::string> etcd_env_;            // every child's but etcd's (credentials)
  struct NoticeReader {
    int64_t offset = 0;  // of the child's log, read up to here
    LogNotices notices;
  };
  std::map<std::string, NoticeReader> notice_readers_;  // by child name
};

}  // namespace tessera::local
