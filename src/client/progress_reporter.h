// ProgressReporter: a trainer's progress (samples, summed cost, step, pass) and evaluation
// results, sent to the job's master about once a second, or as seldom as the master asks (a job
// of many trainers is paced so the master gets about the same reports a second whatever their
// number: master/report_pace.h). Used by the built-in trainer loop and
// by the Python and C APIs. The progress goes on a thread of its own, one report at a time, so
// the training loop never waits for the master (a master failing over took up to 10 s of every
// trainer's loop); what a report that was not delivered carried goes with the next one.
// Evaluation results and the last report (Flush) are sent and waited for. Not thread-safe (one
// trainer loop calls it).
#pragma once

#include <future>
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
  ~ProgressReporter();  // waits for a report on its way (at most its deadline)

  // Adds a batch's samples and summed cost; sends (without waiting) when the master's interval
  // has passed since the last send and no report is on its way.
  void Add(int64_t samples, double cost_sum, int64_t step, int pass);
  // Sends what has accumulated now, with evaluation `metrics` (name, value) of pass `metric_pass`,
  // after the report on its way, and waits for it. A report the master did not take is logged,
  // not returned: progress is advisory.
  void Flush(const std::vector<std::pair<std::string, double>>& metrics = {}, int metric_pass = -1);
  // Sends what has accumulated, if anything and none is on its way, without waiting: a trainer
  // with nothing to do (waiting for data) has its last samples counted now, not at its next batch.
  void FlushPending();

 private:
  // The report of what accumulated (the accumulators start again).
  ProgressReport Take();
  // Sends Take() on a thread of its own, unless a report is on its way.
  void Send();
  // The report on its way, if it is over (or `wait`): the master's pace taken, or on failure its
  // samples and cost put back to go with the next one.
  void Collect(bool wait);
  MasterClient* master_;
  std::string trainer_;
  int64_t samples_ = 0, step_ = 0;
  int pass_ = 0;
  double cost_ = 0;
  TimePoint last_ = Now();
  std::chrono::milliseconds every_{1000};  // until the master says otherwise
  ProgressReport sending_report_;          // on its way
  TimePoint sending_since_;                // the start of the time it covers
  std::future<StatusOr<std::chrono::milliseconds>> sending_;
};

// Whether `trainer` is the lowest-numbered live trainer of `job` (the one that evaluates at the
// end of a pass). True when the list cannot be read, so evaluation is not lost.
bool IsLowestLiveTrainer(etcd::EtcdClient* etcd, const std::string& job, const std::string& trainer);

}  // namespace tessera::master
