// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable (no extra cost) with Clang's thread-safety
// annotations (thread_annotations.h), so members marked GUARDED_BY(mu_) and helpers marked
// REQUIRES(mu_) are checked at compile time instead of by comments.
//   MutexLock lock(&mu_);            // holds mu_ for the scope
//   cv_.Wait(&mu_, [&] { ... });     // REQUIRES mu_ held; waits until the predicate holds
// Thread-safe (that is the point); not copyable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace tessera {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock() lets go early (an error sent outside the lock), Lock()
// takes it again.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (locked_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void Unlock() RELEASE() {
    mu_->Unlock();
    locked_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    locked_ = true;
  }

 private:
  Mutex* mu_;
  bool locked_ = true;
};

class CondVar {
 public:
  // Waits until `done()` holds. REQUIRES: `mu` held (it is released while waiting).
  template <class Pred>
  void Wait(Mutex* mu, Pred done) REQUIRES(mu) {
    std::unique_lock<std::mutex> held(mu->mu_, std::adopt_lock);  // the caller's lock, lent
    cv_.wait(held, done);
    held.release();  // still locked: it goes back to the caller
  }
  // As Wait, for at most `timeout`; returns done().
  template <class Rep, class Period, class Pred>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout, Pred done) REQUIRES(mu) {
    std::unique_lock<std::mutex> held(mu->mu_, std::adopt_lock);
    bool ok = cv_.wait_for(held, timeout, done);
    held.release();
    return ok;
  }
  void NotifyAll() { cv_.notify_all(); }
  void NotifyOne() { cv_.notify_one(); }

 private:
  std::condition_variable cv_;
};

}  // namespace tessera
