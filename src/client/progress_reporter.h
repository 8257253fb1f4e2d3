// ProgressReporter: a trainer's progress (samples, summed cost, step, pass) and evaluation
// results, sent to the job's master about once a second, or as seldom as the master asks (a job
// of many trainers is paced so the master gets about the same reports a second whatever their
// number: master/report_pace.h). Used by the built-in trainer loop and
// by the Python and C APIs. Not thread-safe (one trainer loop calls it).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "client/master_client.h"
#include "common/clock.h"
#include "coord/etcd_client.h"

namespace tessera::master {

class ProgressReporter {
 public:
  ProgressReporter(MasterClient* master, std::string trainer)
      : master_(master), trainer_(std::move(trainer)) {}

  // Adds a batch's samples and summed cost; sends when a second has passed since the last send.
  void Add(int64_t samples, double cost_sum, int64_t step, int pass);
  // Sends what has accumulated now, with evaluation `metrics` (name, value) of pass `metric_pass`.
  // A report the master did not take is logged, not returned: progress is advisory.
  void Flush(const std::vector<std::pair<std::string, double>>& metrics = {}, int metric_pass = -1);
  // Sends what has accumulated, if anything: a trainer with nothing to do (waiting for data)
  // has its last samples counted now, not at its next batch.
  void FlushPending() {
    if (samples_ > 0) Flush();
  }

 private:
  MasterClient* master_;
  std::string trainer_;
  int64_t samples_ = 0, step_ = 0;
  int pass_ = 0;
  double cost_ = 0;
  TimePoint last_ = Now();
  std::chrono::milliseconds every_{1000};  // until the master says otherwise
};

// Whether `trainer` is the lowest-numbered live trainer of `job` (the one that evaluates at the
// end of a pass). True when the list cannot be read, so evaluation is not lost.
bool IsLowestLiveTrainer(etcd::EtcdClient* etcd, const std::string& job, const std::string& trainer);

}  // namespace tessera::master
