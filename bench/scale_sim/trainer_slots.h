// TrainerSlots: what scale_sim knows of each simulated trainer, in memory shared between the
// simulator and the process that runs the trainer (a trainer host, trainer_host.h). One region per
// host: a header (how many trainers the host is asked to run) and a fixed array of slots, one per
// trainer, each written by the host and read by the simulator, but for `stop`, which the simulator
// writes. Every field is a lock-free std::atomic<int64_t>, which works across processes on the
// same mapping; a failed trainer's message is written before `done` is set (release) and read
// after it is seen (acquire).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tessera/status.h"

namespace tessera::bench {

struct TrainerSlot {
  std::atomic<int64_t> stop{0};     // the simulator asks the trainer to leave
  std::atomic<int64_t> done{0};     // it ended; `error` says why when it failed
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> records{0}, tasks_done{0}, tasks_stale{0};
  std::atomic<int64_t> task_left{-1};  // records left in its current task at its last step
  std::atomic<int64_t> started_ms{0}, first_record_ms{0};
  std::atomic<int64_t> phase_ms[4] = {};   // SimTrainer::Phase
  std::atomic<int64_t> pserver0_epoch{0};  // pserver 0's epoch in its directory (0: none yet)
  char error[1024] = {};

  bool training() const { return first_record_ms.load() > 0; }
  bool ended() const { return done.load(std::memory_order_acquire) != 0; }
  // OK unless it ended with an error.
  Status Error() const;
};

struct TrainerRegion {
  std::atomic<int64_t> wanted{0};        // trainers the host is to run (it starts the ones missing)
  std::atomic<int64_t> capacity{0};      // slots in the region
  std::atomic<int64_t> heartbeat_ms{0};  // the host's last round
  std::atomic<int64_t> first_id{-1};     // >= 0: slot i's trainer has id first_id + i; else it claims one
  TrainerSlot slots[1];                  // `capacity` of them
};

static_assert(std::atomic<int64_t>::is_always_lock_free, "slots are shared between processes");

// A region mapped in this process: from a file two processes map (`path`), or anonymous (empty
// path) when the trainers run in this process. Unmapped on destruction.
class MappedRegion {
 public:
  // Creates the file (or anonymous memory) for `capacity` trainers, zeroed.
  static StatusOr<MappedRegion> Create(const std::string& path, int capacity);
  // Maps a region another process created.
  static StatusOr<MappedRegion> Open(const std::string& path);
  MappedRegion(MappedRegion&& o) noexcept : region_(o.region_), bytes_(o.bytes_) { o.region_ = nullptr; }
  MappedRegion& operator=(MappedRegion&&) = delete;
  ~MappedRegion();

  TrainerRegion* get() const { return region_; }
  TrainerRegion* operator->() const { return region_; }

 private:
  MappedRegion(TrainerRegion* r, size_t bytes) : region_(r), bytes_(bytes) {}
  TrainerRegion* region_;
  size_t bytes_;
};

}  // namespace tessera::bench
