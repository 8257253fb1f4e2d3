// Handle::State: the shared completion state behind a tessera::Handle. Each pserver's part of an
// operation calls Complete() once; Wait() returns when all parts are in. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "tessera/client.h"

namespace tessera {

struct Handle::State {
  explicit State(int parts) : remaining(parts) {}

  void Complete(const Status& s, int64_t version, int64_t min_clock) {
    std::lock_guard<std::mutex> lock(mu);
    if (!s.ok() && status.ok()) status = s;
    if (s.ok()) {
      if (version < this->version) this->version = version;
      if (min_clock < this->min_clock) this->min_clock = min_clock;
    }
    if (--remaining == 0) cv.notify_all();
  }

  // Runs parts of the operation that no link thread has started yet on the waiting thread
  // (saves two thread hand-offs per request). Set before the Handle is returned; may be empty.
  std::function<void()> help;

  mutable std::mutex mu;
  std::condition_variable cv;
  int remaining;
  Status status;
  // A part's pserver took a gradient it found non-finite as this trainer's dropped one
  // (nonfinite_skips): why. Set by that part before it completes.
  void SetDropped(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    dropped = why;
  }

  // What Wait() says when every part succeeded (set before the Handle is returned).
  Status outcome;
  bool skipped = false;
  std::string dropped;
  int64_t version = INT64_MAX;
  int64_t min_clock = INT64_MAX;
};

}  // namespace tessera
