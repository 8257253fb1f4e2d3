// DueSnapshots: see due_snapshots.h.
#include "pserver/due_snapshots.h"

#include <spdlog/spdlog.h>

namespace tessera {

void DueSnapshots::Add(Checkpoint c) {
  MutexLock lock(&mu_);
  due_.push_back(std::move(c));
  if (due_.size() > limits_.keep) {
    // The checkpoint thread is not writing (the replies' wait for it timed out): the oldest goes.
    spdlog::warn("pserver {}: the checkpoint of version {} was not written before version {} was due", index_,
                 due_.front().version, due_.back().version);
    due_.pop_front();
  }
  count_.store(due_.size());
}

std::optional<Checkpoint> DueSnapshots::Take() {
  MutexLock lock(&mu_);
  if (due_.empty()) return std::nullopt;
  std::optional<Checkpoint> out = std::move(due_.front());
  due_.pop_front();
  count_.store(due_.size());
  taken_.NotifyAll();
  return out;
}

bool DueSnapshots::WaitForRoom(const std::atomic<bool>& serving) {
  if (count_.load() <= limits_.room) return true;
  const auto until = std::chrono::steady_clock::now() + limits_.wait;
  MutexLock lock(&mu_);
  auto done = [&]() REQUIRES(mu_) { return due_.size() <= limits_.room || !serving.load(); };
  while (!done()) {
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      spdlog::warn("pserver {}: {} checkpoints are still to be written after {} s; training goes on", index_,
                   due_.size(), std::chrono::duration_cast<std::chrono::seconds>(limits_.wait).count());
      return false;
    }
    taken_.WaitFor(&mu_, left, done);
  }
  return true;
}

void DueSnapshots::Wake() {
  MutexLock lock(&mu_);  // a waiter is either before its check or inside the wait: not between
  taken_.NotifyAll();
}

}  // namespace tessera
