// MasterService: the trainers' progress reports and evaluations, the job's summary built from
// them, and the console's cost history (see master_service.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "master/master_service.h"

namespace tessera::master {

grpc::Status MasterService::Summary(StatusReply* reply) {
  MutexLock lock(&mu_);
  if (!active_ || !queue_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leading master");
  auto c = queue_->counts();
  reply->set_pass(queue_->pass());
  reply->set_passes(queue_->passes());
  reply->set_finished(queue_->finished());
  reply->set_tasks(queue_->tasks());
  reply->set_todo(c.todo);
  reply->set_pending(c.pending);
  reply->set_done(c.done);
  reply->set_failed(c.failed);
  const auto& s = queue_->stats();
  reply->set_dispatches(s.dispatches);
  reply->set_duplicates(s.duplicates);
  reply->set_timeouts(s.timeouts);
  reply->set_splits(s.splits);
  reply->set_failures(s.failures);
  reply->set_dataset(manifest_.name);
  reply->set_epoch(election_epoch_);
  // Samples per second over the last 5 s of reports (or since the first report).
  int64_t now = SteadyMillis(), window_samples = 0, oldest = now;
  for (const auto& r : recent_) {
    if (r.time_ms < now - 5000) continue;
    window_samples += r.samples;
    oldest = std::min(oldest, r.time_ms);
  }
  double span = std::max<double>(1.0, std::min<double>(5.0, (now - oldest) / 1000.0 + 1.0));
  reply->set_samples_per_second(window_samples / span);
  double cost = 0;
  for (const auto& [t, c] : last_cost_) cost += c;
  reply->set_last_cost(last_cost_.empty() ? 0 : cost / static_cast<double>(last_cost_.size()));
  reply->set_samples(samples_);
  reply->set_step(max_step_);
  for (const auto& m : metrics_) *reply->add_metrics() = m;
  for (const auto& f : queue_->failed_history()) {
    FailedTask* ft = reply->add_failed_tasks();
    ft->set_id(f.task);
    ft->set_pass(f.pass);
    ft->set_failures(f.failures);
    ft->set_reason(f.reason);
  }
  return grpc::Status::OK;
}

grpc::Status MasterService::AddReport(const ProgressReport& report) {
  const ProgressReport* req = &report;
  MutexLock lock(&mu_);
  int64_t now = SteadyMillis();
  if (req->samples() > 0) {
    recent_.push_back({now, req->samples()});
    samples_ += req->samples();
    last_cost_[req->trainer()] = req->cost_sum() / static_cast<double>(req->samples());
    CostPoint p;
    p.time_ms = WallMillis();
    p.trainer = req->trainer();
    p.step = req->step();
    p.pass = req->pass();
    p.cost = last_cost_[req->trainer()];
    cost_.Add(std::move(p));
  }
  for (const auto& m : req->metrics()) {
    CostPoint p;
    p.time_ms = WallMillis();
    p.step = req->step();
    p.pass = m.pass();
    p.metric = m.name();
    p.value = m.value();
    // A report sent again (its answer lost, or its master gone after recording it) is recorded
    // once: the console and the run's history show each pass's evaluation once.
    if (cost_.HasEvaluation(p)) {
      spdlog::info("pass {} evaluation by trainer {} ({}) was recorded already", m.pass() + 1, req->trainer(),
                   m.name());
      continue;
    }
    cost_.Add(std::move(p));
    spdlog::info("pass {} evaluation by trainer {}: {} = {:.4f}", m.pass() + 1, req->trainer(), m.name(),
                 m.value());
    metrics_.push_back(m);
    if (metrics_.size() > 1000) metrics_.erase(metrics_.begin());
  }
  max_step_ = std::max(max_step_, req->step());
  while (!recent_.empty() && recent_.front().time_ms < now - 10000) recent_.pop_front();
  return grpc::Status::OK;
}

std::vector<CostPoint> MasterService::CostSince(int64_t since) const {
  MutexLock lock(&mu_);
  return cost_.Since(since);
}

void MasterService::RestoreCost(std::vector<CostPoint> points) {
  MutexLock lock(&mu_);
  cost_.Restore(std::move(points));
}

}  // namespace tessera::master
