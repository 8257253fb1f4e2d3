// Jobs: the platform's training jobs — submission, the queue, their life on a backend, and the
// history kept after they end (docs/platform-api.md).
//
// A job is submitted with a built-in model or a code package (a tar or zip stored by its SHA-256,
// extracted into the job's directory) and an entry command, a data set (the namespace's own or
// one shared with it), the training settings, pservers, trainers (a minimum and a maximum:
// elastic between them), resources per process and a priority. Its state:
//   queued -> starting -> running -> succeeded | failed | stopped   (queued -> stopped, too)
// and every change is recorded with its reason (job_events). The monitor (one thread, about
// once a second) observes the jobs the backend runs, copies their cost history and per-worker
// status from their master's run history into the database (so it outlives the job and the server),
// asks the scheduler what to start, shrink or grow, and does it. All state is in the database
// and the job directories: a server killed and restarted carries on with the jobs still running.
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "sandbox/confined_dir.h"
#include "sandbox/job_users.h"
#include "server_backends/backend.h"
#include "server_store/database.h"
#include "server_store/datasets.h"
#include "server_store/submission.h"
#include "server_store/scheduler.h"

namespace tessera::server {

struct JobsOptions {
  std::string data_dir;
  Resources capacity;              // what the backend may use at once
  bool refuse_over_quota = false;  // otherwise a submission over quota is queued
  int64_t tick_ms = 1000;
  // Jobs run sandboxed (local_backend.h): each namespace gets a Unix user from `job_uids`.
  bool sandboxed = false;
  sandbox::UidRange job_uids;
  int64_t keep_free_bytes = int64_t{1} << 30;  // on the data directory's disk
};

class Jobs {
 public:
  Jobs(Database* db, Datasets* datasets, std::unique_ptr<Backend> backend, JobsOptions options);
  ~Jobs();
  Status Start();
  void Stop();

  // Code packages: stored once by digest, readable by the namespaces that uploaded them.
  StatusOr<nlohmann::json> PutPackage(const std::string& ns, const std::string& digest,
                                      const std::string& bytes);

  StatusOr<JobInfo> Submit(const std::string& ns, const std::string& owner_id, const Submission& spec,
                           int64_t now_ms);
  StatusOr<std::vector<JobInfo>> List(const std::string& ns, const std::string& state, int limit);
  StatusOr<JobInfo> Get(const std::string& id);
  StatusOr<nlohmann::json> Events(const std::string& id);
  // Cost and evaluation points after `since` (a sequence number), at most `limit`.
  StatusOr<nlohmann::json> Metrics(const std::string& id, int64_t since, int limit);
  Status RequestStop(const std::string& id, const std::string& by, int64_t now_ms);
  Status Scale(const std::string& id, int trainers, int64_t now_ms);
  Status Delete(const std::string& id);
  // The job's directory, whose files its processes write: read only through this.
  sandbox::ConfinedDir Files(const std::string& id) const { return sandbox::ConfinedDir(JobDir(id)); }
  // The job's log files: node -> path in Files(id).
  std::vector<std::pair<std::string, std::string>> Logs(const std::string& id);
  // The Unix user namespace `ns`'s jobs run as (given on first use, then kept).
  StatusOr<uint32_t> JobUser(const std::string& ns);

  StatusOr<QuotaLimits> Quota(const std::string& ns);
  Status SetQuota(const std::string& ns, const QuotaLimits& q);
  StatusOr<Usage> UsageOf(const std::string& ns);
  // Bytes namespace `ns`'s jobs' directories take on disk (as last measured: every few seconds
  // while a job runs, once when it ends); they count against its storage quota.
  StatusOr<int64_t> JobDiskBytes(const std::string& ns);

  // Stops every job still running and waits for them to end (then kills what is left).
  void StopAll(int64_t timeout_ms);

  // One round of the monitor (tests call it to not wait).
  void Tick(int64_t now_ms);

 private:
  void Loop();
  Status Transition(const std::string& id, const std::string& from, const std::string& to,
                    const std::string& reason, int64_t now_ms);
  void ObserveRunning(int64_t now_ms);
  void ReadHistory(const std::string& id, int64_t next_seq);
  // A job has ended: what it wrote is measured (its disk use), and no worker is shown alive.
  void Ended(const std::string& id);
  // Running jobs' directories measured now and then; a namespace past its storage quota has its
  // jobs that write stopped.
  void MeasureDisks(int64_t now_ms);

  void ScheduleRound(int64_t now_ms);
  Status Launch(const JobInfo& j, int trainers, int64_t now_ms);
  StatusOr<SchedInput> SchedulerInput();
  std::string JobDir(const std::string& id) const { return o_.data_dir + "/jobs/" + id; }

  Database* db_;
  Datasets* datasets_;
  std::unique_ptr<Backend> backend_;
  JobsOptions o_;
  std::mutex tick_mu_;                             // one monitor round at a time; guards history_offset_
  std::map<std::string, int64_t> history_offset_;  // bytes of each job's history read
  int64_t next_disk_ms_ = 0;                       // guarded by tick_mu_
  std::map<std::string, std::string> storage_stops_;  // jobs stopped past their storage quota: why
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t last_submitted_ms_ = 0;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tessera::server
