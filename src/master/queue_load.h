// The leading master's task queue at the start of its lead: restored from the state log (the
// saved settings, snapshot and event deltas) when the job has one, else made from the data set
// and written as the log's first base. Refuses a saved queue of another data set.
#pragma once

#include <memory>
#include <string>

#include "dataset/manifest.h"
#include "master/state_log.h"
#include "master/task_queue.h"

namespace tessera::master {

struct LeadQueue {
  std::unique_ptr<TaskQueue> queue;
  TaskQueueOptions options;  // as saved (a restored queue keeps its own settings)
  std::string settings;      // what the log's bases carry
  int64_t seq = 0;           // the last sequence number of the log
};

// `options`: from the flags and the data set as it is now; `revision`: the election's, logged.
StatusOr<LeadQueue> LoadOrCreateQueue(StateLog& log, const std::string& job,
                                      const dataset::Manifest& manifest, TaskQueueOptions options,
                                      int64_t revision);

}  // namespace tessera::master
