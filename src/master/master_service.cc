// MasterService (see master_service.h).
#include "master/master_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/metrics.h"

namespace tessera::master {

namespace {

// Observes an RPC's duration into the master's latency histogram when it goes out of scope.
class RpcTimer {
 public:
  RpcTimer(metrics::Registry& r, const char* method)
      : h_(r.GetHistogram("tessera_master_rpc_seconds", "master RPC handling time, by method",
                          metrics::LatencyBuckets(), {{"method", method}})),
        start_(SteadyClock::now()) {}
  ~RpcTimer() { h_.Observe(std::chrono::duration<double>(SteadyClock::now() - start_).count()); }

 private:
  metrics::Histogram& h_;
  SteadyClock::time_point start_;
};

}  // namespace

int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now().time_since_epoch()).count();
}

MasterService::MasterService(std::string job_token, const security::JobSecret& secret,
                             std::string dataset_dir, dataset::Manifest manifest)
    : token_(std::move(job_token)), dataset_dir_(std::move(dataset_dir)), manifest_(std::move(manifest)) {
  chunks_ = manifest_.chunks;
  if (!secret.empty()) auth_.emplace(secret);
}

void MasterService::Activate(std::unique_ptr<TaskQueue> queue, StateLog* log, int64_t election_epoch) {
  MutexLock lock(&mu_);
  queue_ = std::move(queue);
  log_ = log;
  election_epoch_ = election_epoch;
  stop_reason_ = Status::OK();
  active_ = true;
}

void MasterService::Stop(const Status& why) {
  MutexLock lock(&mu_);
  active_ = false;
  stop_reason_ = why;
}

grpc::Status MasterService::Authenticate(grpc::ServerContext* ctx, const char* method,
                                         const google::protobuf::Message& request) {
  if (!auth_) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  auto it = md.find(security::kRpcAuthMetadata);
  const std::string token = it == md.end() ? "" : std::string(it->second.data(), it->second.size());
  Status s = auth_->Check(token, method, request.SerializeAsString(), WallMillis());
  if (s.ok()) return grpc::Status::OK;
  registry_.GetCounter("tessera_master_auth_refused_total", "Calls refused for lacking the job's credentials")
      .Add();
  spdlog::warn("master: refused a {} call from {}: {}", method, ctx->peer(), s.message());
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, s.message());
}

grpc::Status MasterService::Check(grpc::ServerContext* ctx, const char* method,
                                  const google::protobuf::Message& request, const std::string& token) {
  if (auto a = Authenticate(ctx, method, request); !a.ok()) return a;
  if (token != token_) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "request for another job: the job token does not match");
  }
  if (!active_) {
    MutexLock lock(&mu_);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leading master: " + stop_reason_.message());
  }
  return grpc::Status::OK;
}

uint64_t MasterService::Log(const Event& e) {
  uint64_t ticket = log_->Append(EncodeEvent(e));
  if (log_->WantsCompaction()) ticket = log_->Compact(queue_->Snapshot());
  return ticket;
}

grpc::Status MasterService::Durable(uint64_t ticket) {
  StateLog* log;
  {
    MutexLock lock(&mu_);
    log = log_;
  }
  Status s = log->WaitDurable(ticket);  // outside the lock: the group commit may take a while
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "master state not persisted: " + s.message());
}

ReportPace MasterService::Pace() const {
  return PaceFor(static_cast<int64_t>(live_trainers_.size()), queue_ && queue_->in_tail());
}

grpc::Status MasterService::GetTask(grpc::ServerContext* ctx, const GetTaskRequest* req,
                                    GetTaskReply* reply) {
  RpcTimer timer(registry_, "GetTask");
  if (auto c = Check(ctx, "GetTask", *req, req->job_token()); !c.ok()) return c;
  if (req->trainer().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "GetTask needs a trainer id");
  uint64_t ticket = 0;
  TaskQueue::Next next;
  std::vector<recordio::ChunkInfo> chunks;  // the task's
  {
    MutexLock lock(&mu_);
    if (!active_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leading master");
    // A task dispatched to this trainer that never reached it goes first (GetTaskRequest.held):
    // as it was, once its dispatch is durable (the answer may have been lost before it was).
    std::optional<TaskQueue::Dispatched> again;
    if (req->held_listed()) {
      std::set<std::pair<int64_t, int64_t>> held;
      for (const auto& h : req->held()) held.insert({h.id(), h.epoch()});
      again = queue_->Undelivered(req->trainer(), held, SteadyMillis());
    }
    if (again) {
      next.kind = TaskQueue::NextKind::kTask;
      next.task = *again;
      ticket = log_->LastTicket();
      spdlog::info(
          "task {} (epoch {}) handed to trainer {} again: the answer that dispatched it did not reach it",
          again->task, again->epoch, req->trainer());
    } else if (!queue_->HoldBackAhead(req->trainer(), live_trainers_)) {
      // A trainer fetching ahead waits while the tasks left are needed by trainers without one.
      next = queue_->Dispatch(req->trainer(), SteadyMillis());
    }
    if (next.kind == TaskQueue::NextKind::kTask && !again) {
      if (next.task.first_chunk + next.task.chunks > static_cast<int64_t>(chunks_.size())) {
        // Cannot happen (chunks are known before their tasks exist); hand it back, logged like any
        // dispatch and failure (a replay must reproduce it), rather than read past the list.
        const std::string why = "its chunks are not known to this master";
        (void)Log(Event{Event::Type::kDispatch, req->trainer(), next.task.task, next.task.epoch, ""});
        (void)queue_->Fail(next.task.task, next.task.epoch, why);
        (void)Log(Event{Event::Type::kFail, req->trainer(), next.task.task, next.task.epoch, why});
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the task's " + why + " yet");
      }
      ticket = Log(Event{Event::Type::kDispatch, req->trainer(), next.task.task, next.task.epoch, ""});
    }
    if (next.kind == TaskQueue::NextKind::kTask)
      chunks.assign(chunks_.begin() + next.task.first_chunk,
                    chunks_.begin() + next.task.first_chunk + next.task.chunks);
    reply->set_pass(queue_->pass());
    reply->set_passes(queue_->passes());
    const ReportPace pace = Pace();
    reply->set_progress_every_ms(pace.progress.count());
    reply->set_task_progress_every_ms(pace.task_progress.count());
    if (next.kind == TaskQueue::NextKind::kWait)
      reply->set_others_training(queue_->OthersHold(req->trainer()));
  }
  reply->set_dataset_dir(dataset_dir_);
  reply->set_dataset(manifest_.name);
  reply->set_record_type(manifest_.record_type);
  switch (next.kind) {
    case TaskQueue::NextKind::kFinished:
      reply->set_kind(GetTaskReply::FINISHED);
      return grpc::Status::OK;
    case TaskQueue::NextKind::kWait:
      reply->set_kind(GetTaskReply::WAIT);
      reply->set_retry_after_ms(200);
      return grpc::Status::OK;
    case TaskQueue::NextKind::kTask:
      break;
  }
  if (auto d = Durable(ticket); !d.ok()) return d;
  reply->set_kind(GetTaskReply::TASK);
  Task* t = reply->mutable_task();
  t->set_id(next.task.task);
  t->set_epoch(next.task.epoch);
  t->set_pass(next.task.pass);
  t->set_skip_records(next.task.skip_records);
  t->set_first_record(next.task.first_record);
  t->set_records(next.task.records);
  t->set_end_record(next.task.end_record);
  for (int64_t c = next.task.first_chunk; c < next.task.first_chunk + next.task.chunks; ++c) {
    const auto& info = chunks[static_cast<size_t>(c - next.task.first_chunk)];
    ChunkRef* ref = t->add_chunks();
    ref->set_index(c);
    ref->set_part(info.part);
    ref->set_offset(info.offset);
    ref->set_records(info.records);
    ref->set_bytes(info.bytes);
    ref->set_crc(info.crc);
    ref->set_raw_bytes(info.raw_bytes);
  }
  return grpc::Status::OK;
}

grpc::Status MasterService::FinishTask(grpc::ServerContext* ctx, const TaskResult* req,
                                       TaskResultReply* reply) {
  RpcTimer timer(registry_, "FinishTask");
  if (auto c = Check(ctx, "FinishTask", *req, req->job_token()); !c.ok()) return c;
  uint64_t ticket = 0;
  {
    MutexLock lock(&mu_);
    if (!active_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leading master");
    int64_t step = req->step() > 0 ? req->step() : -1;
    bool ok = queue_->Finish(req->task_id(), req->epoch(), step);
    reply->set_accepted(ok);
    if (!ok) return grpc::Status::OK;  // stale: nothing changed
    ticket = Log(Event{Event::Type::kFinish, req->trainer(), req->task_id(), req->epoch(), "", step});
    if (queue_->finished()) spdlog::info("all {} passes over {} are done", queue_->passes(), manifest_.name);
  }
  return Durable(ticket);
}

grpc::Status MasterService::ReportTaskProgress(grpc::ServerContext* ctx, const TaskProgress* req,
                                               TaskProgressReply* reply) {
  RpcTimer timer(registry_, "ReportTaskProgress");
  if (auto c = Check(ctx, "ReportTaskProgress", *req, req->job_token()); !c.ok()) return c;
  if (req->offset() < 0 || req->records() < 0 || req->offset() > req->records() || req->read_ahead() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "task progress: offset " + std::to_string(req->offset()) + " of " +
                            std::to_string(req->records()) + " records, read ahead " +
                            std::to_string(req->read_ahead()));
  }
  // Where the reader may be by the time it takes the answer: no cut before it.
  const int64_t reader_at = req->offset() + std::min(req->read_ahead(), req->records() - req->offset());
  uint64_t ticket = 0;
  int64_t cut = 0;
  {
    MutexLock lock(&mu_);
    if (!active_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leading master");
    reply->set_task_progress_every_ms(Pace().task_progress.count());
    queue_->Progressed(req->task_id(), req->epoch(), SteadyMillis());
    for (int64_t at : queue_->ProposeSplit(req->task_id(), req->epoch(), reader_at, req->records())) {
      if (queue_->Split(req->task_id(), req->epoch(), at, req->records()) < 0) break;
      cut = at;
      Event e{Event::Type::kSplit, req->trainer(), req->task_id(), req->epoch(), ""};
      e.cut = at;
      e.records = req->records();
      ticket = Log(e);
    }
    if (cut == 0) return grpc::Status::OK;
    spdlog::info(
        "task {} at trainer {} (record {} of {}, read on to {} before the answer): the records from {} on "
        "split off for idle trainers",
        req->task_id(), req->trainer(), req->offset(), req->records(), reader_at, cut);
  }
  // The holder is told only once the split is durable: a master taking over knows of it.
  if (auto d = Durable(ticket); !d.ok()) return d;
  reply->set_end_record(cut);
  return grpc::Status::OK;
}

grpc::Status MasterService::FailTask(grpc::ServerContext* ctx, const TaskResult* req,
                                     TaskResultReply* reply) {
  RpcTimer timer(registry_, "FailTask");
  if (auto c = Check(ctx, "FailTask", *req, req->job_token()); !c.ok()) return c;
  uint64_t ticket = 0;
  {
    MutexLock lock(&mu_);
    if (!active_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leading master");
    bool ok = queue_->Fail(req->task_id(), req->epoch(), req->error());
    reply->set_accepted(ok);
    if (!ok) return grpc::Status::OK;
    spdlog::warn("task {} failed at trainer {}: {}", req->task_id(), req->trainer(), req->error());
    ticket = Log(Event{Event::Type::kFail, req->trainer(), req->task_id(), req->epoch(), req->error()});
  }
  return Durable(ticket);
}

grpc::Status MasterService::GetStatus(grpc::ServerContext* ctx, const StatusRequest* req,
                                      StatusReply* reply) {
  if (auto a = Authenticate(ctx, "GetStatus", *req); !a.ok()) return a;
  return Summary(reply);
}

grpc::Status MasterService::Report(grpc::ServerContext* ctx, const ProgressReport* req,
                                   ProgressReply* reply) {
  RpcTimer timer(registry_, "Report");
  if (auto c = Check(ctx, "Report", *req, req->job_token()); !c.ok()) return c;
  grpc::Status s = AddReport(*req);
  {
    MutexLock lock(&mu_);
    if (active_) reply->set_progress_every_ms(Pace().progress.count());
  }
  if (s.ok() && req->metrics_size() > 0 && save_evaluations_) save_evaluations_();
  return s;
}

grpc::Status MasterService::ReportPosition(grpc::ServerContext* ctx, const PositionReport* req,
                                           PositionReply*) {
  if (auto c = Check(ctx, "ReportPosition", *req, req->job_token()); !c.ok()) return c;
  if (req->trainer().empty() || req->version() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a position report needs a trainer and a version");
  }
  TrainerPosition p;
  p.trainer = req->trainer();
  p.version = req->version();
  p.first_step = req->first_step();
  for (const auto& t : req->tasks()) {
    p.tasks.push_back(HeldPosition{t.id(), t.epoch(), t.pass(), t.offset(), t.records()});
  }
  {
    MutexLock lock(&mu_);
    if (p.version <= saved_position_) return grpc::Status::OK;  // late: a newer one is saved
    positions_.Add(p);
  }
  MaybeSavePosition();
  return grpc::Status::OK;
}

void MasterService::MaybeSavePosition() {
  MutexLock save_lock(&save_mu_);
  DataPosition position;
  {
    MutexLock lock(&mu_);
    if (!active_) return;
    auto complete = positions_.Complete();
    if (complete.empty() || complete.back() <= saved_position_) return;
    auto p = queue_->PositionAt(complete.back(), positions_.ReportsAt(complete.back()));
    if (!p.ok()) {
      spdlog::warn("no data position for version {}: {}", complete.back(), p.status().ToString());
      positions_.ForgetThrough(complete.back());
      return;
    }
    position = std::move(*p);
  }
  if (save_position_) {
    if (Status s = save_position_(position); !s.ok()) {
      spdlog::warn("could not save the data position of version {}: {}", position.version, s.ToString());
      return;
    }
  }
  spdlog::info("data position of version {} saved: pass {}, {} tasks done, {} in part", position.version,
               position.pass + 1, std::count(position.done.begin(), position.done.end(), true),
               position.partial.size());
  MutexLock lock(&mu_);
  saved_position_ = std::max(saved_position_, position.version);
  positions_.ForgetThrough(position.version);
  if (queue_) queue_->ForgetFinishesThrough(position.version);
}

void MasterService::RefreshMetrics() {
  MutexLock lock(&mu_);
  if (!queue_) return;
  auto c = queue_->counts();
  for (auto [state, n] : {std::pair{"todo", c.todo}, std::pair{"pending", c.pending},
                          std::pair{"done", c.done}, std::pair{"failed", c.failed}}) {
    registry_.GetGauge("tessera_master_tasks", "tasks of the current pass, by state", {{"state", state}})
        .Set(static_cast<double>(n));
  }
  registry_.GetGauge("tessera_master_pass", "the current pass (1-based)").Set(queue_->pass() + 1);
  const auto& st = queue_->stats();
  registry_.GetGauge("tessera_master_dispatches", "task hand-outs since this master leads (incl. replayed)")
      .Set(static_cast<double>(st.dispatches));
  registry_.GetGauge("tessera_master_task_timeouts", "tasks that timed out")
      .Set(static_cast<double>(st.timeouts));
  registry_.GetGauge("tessera_master_task_failures", "task failures reported")
      .Set(static_cast<double>(st.failures));
  registry_.GetGauge("tessera_master_samples", "samples trained, as reported to this master")
      .Set(static_cast<double>(samples_));
  registry_.GetGauge("tessera_master_step", "the largest step reported").Set(static_cast<double>(max_step_));
}

void MasterService::Tick(int64_t now_ms) {
  MutexLock lock(&mu_);
  if (!active_) return;
  for (auto [task, epoch] : queue_->Overdue(now_ms)) {
    if (queue_->Expire(task, epoch)) {
      spdlog::warn("task {} (epoch {}) timed out; it goes back to the queue", task, epoch);
      Log(Event{Event::Type::kExpire, "", task, epoch, ""});
    }
  }
}

void MasterService::TrainersChanged(const MemberList& trainers) {
  // A watch that has not listed the trainers yet (revision 0) knows nothing of them: taken as
  // "none left", it made a new leader return every live trainer's tasks to the queue.
  if (trainers.revision == 0) return;
  std::set<std::string> live;
  for (const auto& m : trainers.members) live.insert(m.name);
  {
    MutexLock lock(&mu_);
    positions_.SetLive(live);
    live_trainers_ = live;
  }
  MaybeSavePosition();  // a trainer that left is not waited for any more
  MutexLock lock(&mu_);
  if (!active_) return;
  // Any trainer holding tasks that is not registered any more (also one that vanished while no
  // master was leading) gets its tasks returned now, not after the task timeout.
  std::set<std::string> holders;
  for (const auto& [task, trainer] : queue_->PendingTrainers()) holders.insert(trainer);
  for (const auto& t : holders) {
    if (live.count(t)) continue;
    int n = queue_->TrainerLost(t);
    if (n > 0) {
      spdlog::warn("trainer {} is gone; its {} pending tasks go back to the queue", t, n);
      Log(Event{Event::Type::kLost, t, 0, 0, ""});
    }
  }
}

}  // namespace tessera::master
