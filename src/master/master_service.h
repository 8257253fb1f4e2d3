// MasterService: the leading master's gRPC service (tessera.master.Master). It owns the
// TaskQueue and the StateLog: every change is applied under one lock, appended to the log, and
// the RPC that caused it is answered only once the change is durable in etcd. A timer (Tick)
// expires overdue tasks; a watch of the trainers' registrations (TrainersChanged) returns a lost
// trainer's tasks at once. Until Activate() (and after Stop()) every RPC is refused as
// UNAVAILABLE, so trainers look for the leader again.
// Thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "coord/registry.h"
#include "dataset/manifest.h"
#include "master/console_state.h"
#include "master/events.h"
#include "master/position.h"
#include "master/report_pace.h"
#include "master/state_log.h"
#include "master/task_queue.h"
#include "security/rpc_auth.h"
#include "tessera/master.grpc.pb.h"

namespace tessera::master {

class MasterService final : public tessera::master::Master::Service {
 public:
  // `secret`: the job's; every call must carry a token made with it (security/rpc_auth.h), else
  // it is refused (UNAUTHENTICATED), logged and counted. Empty: calls are not authenticated.
  MasterService(std::string job_token, const security::JobSecret& secret, std::string dataset_dir,
                dataset::Manifest manifest);

  // Starts serving with a restored or new queue whose changes go to `log`. `election_epoch`
  // is reported in status.
  void Activate(std::unique_ptr<TaskQueue> queue, StateLog* log, int64_t election_epoch);
  // Refuses everything from now on with `why`.
  void Stop(const Status& why);
  bool active() const { return active_.load(); }

  // Where data positions of consistent checkpoints go (the node saves them in etcd, fenced).
  // Unset: positions are collected but not saved.
  void SetPositionSaver(std::function<Status(const DataPosition&)> save) { save_position_ = std::move(save); }
  // Called (outside the lock) when a report brought evaluation results, before the report is
  // answered: they are saved at once, not with the next periodic save of the cost history, so a
  // master that dies right after cannot lose them.
  void SetEvaluationSaver(std::function<void()> save) { save_evaluations_ = std::move(save); }

  // The console's cost and evaluation history (points with seq > `since`), and its restore
  // after a takeover.
  std::vector<CostPoint> CostSince(int64_t since) const;
  void RestoreCost(std::vector<CostPoint> points);
  // This master's Prometheus metrics (RPC latencies; the task gauges are refreshed by
  // RefreshMetrics before each scrape).
  metrics::Registry& metrics() { return registry_; }
  void RefreshMetrics();

  void Tick(int64_t now_ms);
  void TrainersChanged(const MemberList& trainers);

  grpc::Status GetTask(grpc::ServerContext*, const GetTaskRequest*, GetTaskReply*) override;
  grpc::Status FinishTask(grpc::ServerContext*, const TaskResult*, TaskResultReply*) override;
  grpc::Status FailTask(grpc::ServerContext*, const TaskResult*, TaskResultReply*) override;
  grpc::Status GetStatus(grpc::ServerContext*, const StatusRequest*, StatusReply*) override;
  // GetStatus's answer for callers in this process (the node's console).
  grpc::Status Summary(StatusReply* reply);
  grpc::Status Report(grpc::ServerContext*, const ProgressReport*, ProgressReply*) override;
  grpc::Status ReportPosition(grpc::ServerContext*, const PositionReport*, PositionReply*) override;
  // A trainer's progress in its task: while trainers are idle, the rest is split off for them.
  grpc::Status ReportTaskProgress(grpc::ServerContext*, const TaskProgress*, TaskProgressReply*) override;

  // ---- Following a growing data set (a queue with `follow`; master_service_follow.cc) ----
  // Adds tasks for the chunks of `now` (the data set's manifest read again) past those the
  // queue has, once durable. FailedPrecondition if the chunks it has changed (the data set was
  // replaced, not appended to). Returns how many chunks were added (0: none new, or the queue
  // does not follow or no longer).
  StatusOr<int64_t> FollowChunks(const dataset::Manifest& now);
  // Before Activate, on a master taking over a job that follows its data set: the data set's
  // chunks as they are now (the old leader may have added some since this master read the
  // manifest). FailedPrecondition if they are fewer than the restored queue's.
  Status SetChunks(std::vector<recordio::ChunkInfo> chunks, int64_t queue_chunks);
  // No more chunks: the job ends when the tasks it has are done. Durable when it returns.
  Status StopFollowing();

 private:
  // Report's bookkeeping, under the lock.
  grpc::Status AddReport(const ProgressReport& report);
  // The call's job credentials, then (Check) the job token and leadership.
  grpc::Status Authenticate(grpc::ServerContext* ctx, const char* method,
                            const google::protobuf::Message& request);
  grpc::Status Check(grpc::ServerContext* ctx, const char* method, const google::protobuf::Message& request,
                     const std::string& token);
  // How often trainers are to report now (report_pace.h).
  ReportPace Pace() const REQUIRES(mu_);
  // Logs `e` (REQUIRES: mu_ held) and returns the ticket to wait for.
  uint64_t Log(const Event& e) REQUIRES(mu_);
  grpc::Status Durable(uint64_t ticket) EXCLUDES(mu_);
  // Saves the newest complete data position, if there is a new one. Takes mu_ itself.
  void MaybeSavePosition();

  const std::string token_;
  std::optional<security::RpcAuth> auth_;
  const std::string dataset_dir_;
  const dataset::Manifest manifest_;  // as it was at the start (name, format)
  std::atomic<bool> active_{false};

  mutable Mutex mu_;  // guards everything below
  std::unique_ptr<TaskQueue> queue_ GUARDED_BY(mu_);
  std::vector<recordio::ChunkInfo> chunks_ GUARDED_BY(mu_);  // the data set's, and those followed since
  StateLog* log_ GUARDED_BY(mu_) = nullptr;
  Status stop_reason_ GUARDED_BY(mu_) = Status::Unavailable("this master is a standby");
  int64_t election_epoch_ GUARDED_BY(mu_) = 0;
  // Progress (guarded by mu_): recent reports for the rate, the latest cost, metrics per pass.
  struct Recent {
    int64_t time_ms;
    int64_t samples;
  };
  std::deque<Recent> recent_ GUARDED_BY(mu_);
  std::map<std::string, double> last_cost_ GUARDED_BY(mu_);  // per trainer
  int64_t samples_ GUARDED_BY(mu_) = 0;
  int64_t max_step_ GUARDED_BY(mu_) = 0;
  std::vector<Metric> metrics_ GUARDED_BY(mu_);
  CostHistory cost_ GUARDED_BY(mu_);
  metrics::Registry registry_;  // thread-safe itself
  // Consistent checkpoints: trainers' position reports (guarded by mu_), the saver.
  PositionBook positions_ GUARDED_BY(mu_);
  std::set<std::string> live_trainers_ GUARDED_BY(mu_);  // registered now (TrainersChanged)
  int64_t saved_position_ GUARDED_BY(mu_) = -1;
  // Set once before the service serves (SetPositionSaver, SetEvaluationSaver), read-only after.
  std::function<Status(const DataPosition&)> save_position_;
  std::function<void()> save_evaluations_;
  Mutex save_mu_;  // one save at a time, in version order
};

// Milliseconds on the steady clock (task deadlines).
int64_t SteadyMillis();

}  // namespace tessera::master
