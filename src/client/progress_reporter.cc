// ProgressReporter (see progress_reporter.h).
#include "client/progress_reporter.h"

#include <spdlog/spdlog.h>

#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera::master {

namespace {
constexpr std::chrono::seconds kReportDeadline{10};
}  // namespace

ProgressReporter::~ProgressReporter() { Collect(true); }

ProgressReport ProgressReporter::Take() {
  ProgressReport r;
  r.set_trainer(trainer_);
  r.set_step(step_);
  r.set_pass(pass_);
  r.set_samples(samples_);
  r.set_cost_sum(cost_);
  r.set_seconds(std::chrono::duration<double>(Now() - last_).count());
  samples_ = 0;
  cost_ = 0;
  last_ = Now();
  return r;
}

void ProgressReporter::Collect(bool wait) {
  if (!sending_.valid()) return;
  if (!wait && sending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  StatusOr<std::chrono::milliseconds> next = sending_.get();
  if (next.ok()) {
    if (next->count() > 0) every_ = *next;  // the master's pace (master/report_pace.h)
    return;
  }
  spdlog::warn("progress report not delivered (it goes with the next one): {}", next.status().ToString());
  samples_ += sending_report_.samples();
  cost_ += sending_report_.cost_sum();
  last_ = sending_since_;  // the next report covers its time too
}

void ProgressReporter::Add(int64_t samples, double cost_sum, int64_t step, int pass) {
  samples_ += samples;
  cost_ += cost_sum;
  step_ = step;
  pass_ = pass;
  Collect(false);
  if (Now() - last_ >= every_) Send();
}

void ProgressReporter::FlushPending() {
  Collect(false);
  if (samples_ > 0) Send();
}

void ProgressReporter::Send() {
  if (sending_.valid()) return;  // one at a time: the next one takes what accumulates meanwhile
  sending_since_ = last_;
  sending_report_ = Take();
  sending_ = std::async(std::launch::async, [master = master_, r = sending_report_] {
    return master->Report(r, Deadline(kReportDeadline));
  });
}

void ProgressReporter::Flush(const std::vector<std::pair<std::string, double>>& metrics, int metric_pass) {
  Collect(true);
  ProgressReport r = Take();
  for (const auto& [name, value] : metrics) {
    auto* pm = r.add_metrics();
    pm->set_name(name);
    pm->set_value(value);
    pm->set_pass(metric_pass);
  }
  auto next = master_->Report(r, Deadline(kReportDeadline));
  if (!next.ok())
    spdlog::warn("progress report not delivered: {}", next.status().ToString());
  else if (next->count() > 0)
    every_ = *next;  // the master's pace (master/report_pace.h)
}

bool IsLowestLiveTrainer(etcd::EtcdClient* etcd, const std::string& job, const std::string& trainer) {
  auto list = Registry(etcd, keys::TrainerPrefix(job)).List();
  if (!list.ok() || list->members.empty()) return true;
  return list->members.front().name == trainer;  // sorted numerically
}

}  // namespace tessera::master
