// ProgressReporter (see progress_reporter.h).
#include "client/progress_reporter.h"

#include <spdlog/spdlog.h>

#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera::master {

void ProgressReporter::Add(int64_t samples, double cost_sum, int64_t step, int pass) {
  samples_ += samples;
  cost_ += cost_sum;
  step_ = step;
  pass_ = pass;
  if (Now() - last_ >= every_) Flush();
}

void ProgressReporter::Flush(const std::vector<std::pair<std::string, double>>& metrics, int metric_pass) {
  ProgressReport r;
  r.set_trainer(trainer_);
  r.set_step(step_);
  r.set_pass(pass_);
  r.set_samples(samples_);
  r.set_cost_sum(cost_);
  r.set_seconds(std::chrono::duration<double>(Now() - last_).count());
  for (const auto& [name, value] : metrics) {
    auto* pm = r.add_metrics();
    pm->set_name(name);
    pm->set_value(value);
    pm->set_pass(metric_pass);
  }
  auto next = master_->Report(r, Deadline(std::chrono::seconds(10)));
  if (!next.ok())
    spdlog::warn("progress report not delivered: {}", next.status().ToString());
  else if (next->count() > 0)
    every_ = *next;  // the master's pace (master/report_pace.h)
  samples_ = 0;
  cost_ = 0;
  last_ = Now();
}

bool IsLowestLiveTrainer(etcd::EtcdClient* etcd, const std::string& job, const std::string& trainer) {
  auto list = Registry(etcd, keys::TrainerPrefix(job)).List();
  if (!list.ok() || list->members.empty()) return true;
  return list->members.front().name == trainer;  // sorted numerically
}

}  // namespace tessera::master
