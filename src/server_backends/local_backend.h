// LocalBackend: runs each job on the server's own machine as one `tessera local` process (the
// supervisor that restarts crashed processes), in a session of its own so that it outlives the
// server. Its output goes to <dir>/supervisor.log, each process's to <dir>/run/logs/.
//
// Sandboxed (the default; docs/security.md, "Sandboxes"): the job runs in a control group of its
// own that carries its quota (CPU, memory, tasks) and holds everything it starts, as its
// namespace's Unix user, in namespaces of its own (sandbox/bwrap_command.h). It sees the system
// read-only, its directories at /job (run, code and home writable; control, where the server
// writes its wishes, read-only), the data sets it may read at /data/<namespace>, read-only, and
// nothing else of the host. Its processes talk over the loopback of its own network namespace,
// its etcd requires credentials, and the server deals with it only through its directory: files
// it writes (read through sandbox::ConfinedDir), files the server writes (control/trainers), and
// its control group (found, limits, stopped). A restarted server finds a job again by its group.
// Unsandboxed (--sandbox off): the job runs as the server's own user with the server's view of
// the machine, found by its pid (checked against its command line).
// Thread-safe.
#pragma once

#include <mutex>
#include <set>

#include "common/cgroup.h"
#include "server_backends/backend.h"

namespace tessera::server {

struct LocalBackendOptions {
  std::string tessera_bin;  // this program
  std::string data_dir;     // the server's (data sets under data_dir/datasets)
  bool sandboxed = true;
  // Tasks (processes and threads together) a job may have, per process the quota counts.
  int64_t tasks_per_process = 256;
};

// What a sandboxed job's control group carries beyond the quota's (pservers + trainers) x
// per-process resources: its etcd, master and supervisor.
inline constexpr double kJobOverheadCpu = 0.5;
inline constexpr int64_t kJobOverheadMemoryMb = 384;
inline constexpr int64_t kJobOverheadTasks = 3;  // processes' worth of tasks

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(LocalBackendOptions options);
  std::string Name() const override { return "local"; }
  StatusOr<std::string> Start(const JobLaunch& job) override;
  JobObservation Observe(const std::string& dir, const std::string& handle) override;
  Status Scale(const std::string& dir, const std::string& handle, int trainers) override;
  Status Stop(const std::string& dir, const std::string& handle, bool force) override;
  std::vector<std::pair<std::string, std::string>> Logs(const std::string& dir) override;

  // Where a job's things are as the job sees them (sandboxed: its run directory at /job/run, its
  // code at /job/code, its store at /data/<ns>, its control directory at /job/control).
  struct JobPaths {
    std::string run, code, store, control;
  };
  // The job spec its `tessera local` runs (pure): the launch's, with the store and the trainer
  // command (cd into the code, then the entry command) where the job sees them, and the trainers
  // started now as the ones the first step waits for.
  static spec::JobSpec SpecOf(const JobLaunch& job, const JobPaths& paths);
  // The `tessera local` command line for a job whose spec is at paths.control/job-spec.json (pure).
  static std::vector<std::string> Argv(const std::string& bin, const JobPaths& paths);
  // The limits of a job of `pservers` + `trainers` processes of `job`'s per-process resources.
  static CgroupLimits LimitsOf(const JobLaunch& job, int trainers, int64_t tasks_per_process);

 private:
  StatusOr<std::string> StartUnconfined(const JobLaunch& job);
  StatusOr<std::string> StartSandboxed(const JobLaunch& job);
  bool PidAlive(const std::string& dir, int pid);
  void Reap();
  LocalBackendOptions o_;
  CgroupLayout layout_;  // read once
  std::mutex mu_;
  std::set<int> children_;                 // started by this server: reaped here
  std::set<std::string> leftover_groups_;  // of ended jobs, not yet removed
};

}  // namespace tessera::server
