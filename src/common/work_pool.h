// WorkPool: a fixed set of threads that run the parts of one piece of work together with the
// caller, e.g. the rows of one sparse request split over a pserver's cores. Run(n, fn) calls
// fn(0) .. fn(n-1), each once, on the pool's threads and the calling thread, and returns when
// all have returned. The threads sleep between runs (no spinning); one Run at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace tessera {

class WorkPool {
 public:
  // `threads`: how many run a piece of work, the caller included (1: the caller alone, no thread
  // started). 0: the cores this process may use (HostCores: its CPUs within its CPU quota), at
  // most `cap`.
  explicit WorkPool(int threads, int cap = 8);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; }
  void Run(int parts, const std::function<void(int)>& fn);
  // Runs shared with the pool's threads so far (for tests and metrics).
  int64_t runs() const { return shared_runs_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  // Runs parts of the current run until none is left; returns how many it ran.
  int Claim(const std::function<void(int)>& fn, int parts, uint64_t run);

  Mutex run_mu_;  // one Run at a time
  Mutex mu_;
  CondVar start_, done_;
  const std::function<void(int)>* fn_ GUARDED_BY(mu_) = nullptr;
  int parts_ GUARDED_BY(mu_) = 0;
  int next_ GUARDED_BY(mu_) = 0;     // the next part to hand out
  int running_ GUARDED_BY(mu_) = 0;  // parts handed out and not finished
  uint64_t run_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> shared_runs_{0};
};

}  // namespace tessera
