// The run directory of `tessera local` (RUN/run.json, logs/, etcd/, checkpoints/, model.tsm,
// result.json) and the rules that keep it from damage: one live supervisor per directory (a lock
// held while it runs), a new run never reuses a directory, and --resume continues only a run that
// can be continued (not a finished one, not one without checkpoints), changing nothing otherwise.
// Thread-compatible.
#pragma once

#include <string>

#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera::supervise {

// An exclusive lock on a run directory (flock on RUN/.lock, which holds the owner's pid). The lock
// goes with the process, whatever way it ends.
class RunDirLock {
 public:
  // Creates the directory if needed. AlreadyExists("... already running (pid N) ...") while
  // another process holds it.
  static StatusOr<RunDirLock> Acquire(const std::string& run_dir);
  RunDirLock(RunDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RunDirLock& operator=(RunDirLock&&) = delete;
  RunDirLock(const RunDirLock&) = delete;
  ~RunDirLock();

 private:
  explicit RunDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Before a new run: the directory was not used by an earlier one.
Status CheckNewRun(const std::string& run_dir);

// Before --resume, from the files alone: the directory holds a run of `job` on `dataset` that has
// not finished. Nothing is changed.
Status CheckResumable(const std::string& run_dir, const std::string& job, const std::string& dataset,
                      bool own_etcd);

// Before --resume, once the run's etcd answers: every pserver index of the job has a checkpoint
// record to continue from. Nothing is changed.
Status CheckResumeCheckpoints(etcd::EtcdClient* etcd, const std::string& job, const std::string& run_dir);

}  // namespace tessera::supervise
