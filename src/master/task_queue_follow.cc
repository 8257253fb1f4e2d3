// TaskQueue: following a growing data set (see task_queue.h).
#include "master/task_queue.h"

namespace tessera::master {

Status TaskQueue::AddChunks(const std::vector<int64_t>& chunk_records) {
  if (!options_.follow) return Status::FailedPrecondition("this job does not follow its data set");
  if (!following_) return Status::FailedPrecondition("this job stopped following its data set");
  for (int64_t r : chunk_records)
    if (r < 0) return Status::InvalidArgument("a chunk with a negative record count");
  for (int64_t r : chunk_records) {
    const int64_t chunk = chunks();
    added_.push_back(r);
    spans_.push_back({chunk, 1, 0, 0});
    order_.push_back(tasks_);
    done_.push_back(false);
    dispatched_.push_back(false);
    ++tasks_;
  }
  return Status::OK();
}

void TaskQueue::StopFollowing() {
  following_ = false;
  MaybeEndPass();
}

}  // namespace tessera::master
