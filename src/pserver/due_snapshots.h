// DueSnapshots: the pserver's queue of consistent checkpoint copies taken at due versions and not
// yet written (PserverServiceOptions::snapshot_every). The service adds a copy under its own lock
// at a barrier; the checkpoint thread takes them in order; a step's replies wait (WaitForRoom)
// while more than `room` copies wait, so training goes no faster than its checkpoints are
// written. Beyond `keep` waiting copies the oldest is dropped (a checkpoint thread that stopped or
// a disk that hangs: memory stays bounded). Owns its lock and condition variable; thread-safe. Its
// lock is taken inside the service's, never the other way round.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>

#include "checkpoint/checkpoint_file.h"
#include "common/mutex.h"

namespace tessera {

class DueSnapshots {
 public:
  struct Limits {
    size_t room = 1;  // more waiting than this: replies wait for the checkpoint thread
    size_t keep = 4;  // more waiting than this: the oldest is dropped
    std::chrono::steady_clock::duration wait = std::chrono::seconds(60);  // a reply's longest wait
  };
  DueSnapshots(int index, Limits limits) : index_(index), limits_(limits) {}

  // Queues `c`; drops (and logs) the oldest beyond limits.keep.
  void Add(Checkpoint c);
  // The oldest copy not taken yet, if any; wakes replies waiting for room.
  std::optional<Checkpoint> Take();
  size_t size() const { return count_.load(); }
  // While more than limits.room copies wait and `serving` holds, waits for the checkpoint
  // thread, at most limits.wait. Returns false (and logs) when that wait ran out.
  bool WaitForRoom(const std::atomic<bool>& serving);
  // Wakes the waiting replies to look at `serving` again (call after changing it).
  void Wake();

 private:
  const int index_;  // the pserver's, for the logs
  const Limits limits_;
  mutable Mutex mu_;
  std::deque<Checkpoint> due_ GUARDED_BY(mu_);
  std::atomic<size_t> count_{0};  // due_.size(), read without the lock
  CondVar taken_;                 // a copy was taken, or Wake()
};

}  // namespace tessera
