// WorkPool (see work_pool.h).
#include "common/work_pool.h"

#include <algorithm>

#include "common/math_threads.h"

namespace tessera {

WorkPool::WorkPool(int threads, int cap) {
  if (threads <= 0) threads = std::clamp(HostCores(), 1, cap);
  for (int i = 1; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkPool::~WorkPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  start_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void WorkPool::Run(int parts, const std::function<void(int)>& fn) {
  if (parts <= 0) return;
  if (threads_.empty() || parts == 1) {
    for (int i = 0; i < parts; ++i) fn(i);
    return;
  }
  MutexLock one(&run_mu_);
  shared_runs_.fetch_add(1, std::memory_order_relaxed);
  uint64_t run;
  {
    MutexLock lock(&mu_);
    fn_ = &fn;
    parts_ = parts;
    next_ = 0;
    run = ++run_;
  }
  start_.NotifyAll();
  Claim(fn, parts, run);
  MutexLock lock(&mu_);
  done_.Wait(&mu_, [&]() REQUIRES(mu_) { return next_ >= parts_ && running_ == 0; });
  fn_ = nullptr;
}

int WorkPool::Claim(const std::function<void(int)>& fn, int parts, uint64_t run) {
  int ran = 0;
  while (true) {
    int i;
    {
      MutexLock lock(&mu_);
      if (run_ != run || next_ >= parts) return ran;
      i = next_++;
      ++running_;
    }
    fn(i);
    ++ran;
    bool last;
    {
      MutexLock lock(&mu_);
      --running_;
      last = next_ >= parts_ && running_ == 0;
    }
    if (last) done_.NotifyAll();
  }
}

void WorkPool::Loop() {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* fn;
    int parts;
    uint64_t run;
    {
      MutexLock lock(&mu_);
      start_.Wait(&mu_, [&]() REQUIRES(mu_) { return stop_ || (run_ != seen && fn_ != nullptr); });
      if (stop_) return;
      seen = run = run_;
      fn = fn_;
      parts = parts_;
    }
    Claim(*fn, parts, run);
  }
}

}  // namespace tessera
