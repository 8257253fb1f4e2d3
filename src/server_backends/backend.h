// Backend: where the platform runs a job's processes. The server decides (scheduler.h) and
// records (jobs.h); a backend only starts, observes, scales and stops, and keeps everything it
// needs to find a job again in the job's directory and its `handle`, so a restarted server
// re-attaches to the jobs still running. Implementations: local (local_backend.h), kubernetes
// (k8s_backend.h).
//
// A job's directory holds what the job's own processes wrote (its run directory: history, logs,
// result, model), which the server reads as root: paths into it are relative, and every read goes
// through sandbox::ConfinedDir, which follows no link and reads only regular files.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "tessera/status.h"

namespace tessera::server {

// What a backend needs to start a job.
struct JobLaunch {
  std::string id;   // also the job's name inside its processes
  std::string ns;   // the platform namespace it runs for
  std::string dir;  // the job's directory (created by the server; the backend's to fill)
  // The training, in the one job spec (spec/job_spec.h): its name is `id`; its store and code are
  // the backend's to place (below), and a trainer's own command (job.command) runs in the code;
  // trainers_max is what to start with.
  spec::JobSpec job;
  // Submitted as a whole spec, every setting of `job` is the user's; otherwise a backend keeps its
  // own defaults for what the field-by-field form cannot say (local: no checkpoints).
  bool whole_spec = false;
  std::string store;     // the data set store on this host
  std::string code_dir;  // the user's code (extracted), where job.command runs; empty: job.model
  int trainers = 1;      // to start now (the scheduler's choice, up to job.trainers_max)
  double cpu = 0.5;      // each process's share
  int64_t memory_mb = 512, gpus = 0;
  // Sandboxed backends: the namespace's job user (sandbox/job_users.h), the data sets the job may
  // read (host directories: the namespace's store and the data sets shared with it), and the
  // largest file it may write (what its namespace's storage quota has left; nullopt: no quota).
  uint32_t uid = 0;
  std::vector<std::string> readable;
  std::optional<int64_t> max_file_bytes;
};

// What a backend sees of a job.
struct JobObservation {
  bool alive = false;      // its processes run
  bool ready = false;      // its master answers (running, not just starting)
  bool completed = false;  // ended with every pass done
  std::string why_ended;   // when it ended otherwise: the last error lines
  // A limit the kernel enforced on it ("out of memory (limit 512 MiB): ..."): the job has failed
  // and is to be stopped.
  std::string limit_hit;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string Name() const = 0;
  // Starts the job; returns its handle (recorded by the server).
  virtual StatusOr<std::string> Start(const JobLaunch& job) = 0;
  virtual JobObservation Observe(const std::string& dir, const std::string& handle) = 0;
  virtual Status Scale(const std::string& dir, const std::string& handle, int trainers) = 0;
  // Asks the job to stop (graceful); `force` kills what is left.
  virtual Status Stop(const std::string& dir, const std::string& handle, bool force) = 0;
  // The job's log files: node name -> path relative to its directory.
  virtual std::vector<std::pair<std::string, std::string>> Logs(const std::string& dir) = 0;
  // Bytes the job's directory takes on disk now (blocks in use: a sparse file counts what it
  // holds), without following a link.
  virtual int64_t DiskBytes(const std::string& dir);
};

// Files of a job's directory (relative to it) that its processes write.
inline constexpr char kHistoryFile[] =
    "run/history.jsonl";                                  // the master's run history (master/run_history.h)
inline constexpr char kResultFile[] = "run/result.json";  // written once every pass is done
inline constexpr char kModelFile[] = "run/model.tsm";     // the trained model

}  // namespace tessera::server
