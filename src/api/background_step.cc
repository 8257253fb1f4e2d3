// A step on a thread of its own, its values handed out as they are written: see
// include/tessera/background_step.h.
#include "tessera/background_step.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/while_waiting.h"

namespace tessera::api {

struct BackgroundStep::Impl {
  void Loop();
  // Waits (with mu held by `lock`) until the step has ended.
  void WaitEnded(std::unique_lock<std::mutex>& lock) {
    cv.wait(lock, [&] { return !running.load(std::memory_order_acquire); });
  }
  bool ended() const { return !running.load(std::memory_order_acquire); }

  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  std::function<Handle()> next;  // the step to run (set by Start, taken by the thread)
  bool stopping = false;
  std::atomic<bool> running{false};  // from Start until the step ended
  std::optional<WaitingCall> call;   // the step's call, once sent (where its reply goes)
  bool ahead_this_step = false;      // ValuesReady said true during this step
  Handle result;
  std::atomic<uint64_t> steps_ahead{0};
};

void BackgroundStep::Impl::Loop() {
  while (true) {
    std::function<Handle()> step;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stopping || next != nullptr; });
      if (next == nullptr) return;  // stopping, nothing to run
      step = std::exchange(next, nullptr);
    }
    Handle h;
    {
      // The call's reply: where it lies and how far it is written (only the first call this
      // thread sends runs the work; a pserver tells only a call in place).
      WhileWaiting publish(
          [this](const WaitingCall& c) {
            {
              std::lock_guard<std::mutex> lock(mu);
              call = c;
            }
            cv.notify_all();
          },
          /*wants_progress=*/true);
      h = step();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      result = h;
      call.reset();
      running.store(false, std::memory_order_release);
    }
    cv.notify_all();
  }
}

BackgroundStep::BackgroundStep() : impl_(std::make_unique<Impl>()) {}

BackgroundStep::~BackgroundStep() {
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->WaitEnded(lock);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void BackgroundStep::Start(std::function<Handle()> step) {
  Impl& m = *impl_;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.WaitEnded(lock);  // the caller waited already: this returns at once
    m.next = std::move(step);
    m.call.reset();
    m.ahead_this_step = false;
    m.result = Handle();
    m.running.store(true, std::memory_order_release);
    if (!m.thread.joinable()) m.thread = std::thread([&m] { m.Loop(); });
  }
  m.cv.notify_all();
}

bool BackgroundStep::in_flight() const { return !impl_->ended(); }

uint64_t BackgroundStep::steps_ahead() const { return impl_->steps_ahead.load(std::memory_order_relaxed); }

bool BackgroundStep::ValuesReady(const void* begin, const void* end) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&] { return m.ended() || m.call.has_value(); });
  if (m.ended()) return false;
  const WaitingCall call = *m.call;
  const char* b = static_cast<const char*>(begin);
  const char* e = static_cast<const char*>(end);
  if (call.progress == nullptr || e <= b || b < call.reply_base || e > call.reply_base + call.reply_room) {
    m.WaitEnded(lock);
    return false;
  }
  lock.unlock();
  // Bounded by the step's end (every call ends, at the latest at its deadline); the reply's socket
  // is the step thread's, and may be closed and its number reused once the step ends, so the end
  // is what this wait watches.
  bool ended = false;
  const bool written =
      WaitForProgress(*call.progress, static_cast<uint64_t>(e - call.reply_base), [&](bool still) {
        if (still) {
          lock.lock();
          m.cv.wait_for(lock, kSleep, [&] { return m.ended(); });
          lock.unlock();
        }
        return ended = m.ended();
      });
  if (ended || !written) return false;
  lock.lock();
  if (!m.ahead_this_step) {
    m.ahead_this_step = true;
    m.steps_ahead.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

Handle BackgroundStep::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->WaitEnded(lock);
  return impl_->result;
}

}  // namespace tessera::api
