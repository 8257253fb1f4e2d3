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
  // How far the step's thread follows the values of several pservers' calls at a time.
  static constexpr size_t kFollowStride = 64 << 10;

  void Loop();
  // This step's values were given out early (with mu held).
  void CountAhead() {
    if (ahead_this_step) return;
    ahead_this_step = true;
    steps_ahead.fetch_add(1, std::memory_order_relaxed);
  }
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
  // A step over several pservers' calls (call->arrival): the step's thread follows its values as
  // they land, and says here how far they are the step's, from the first at `span.first`.
  std::pair<const char*, const char*> span{};
  const char* ready_upto = nullptr;
  bool following = false;  // it may say more
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
      // thread sends runs the work; a pserver tells only a call in place). Over several
      // pservers' calls, the values are followed here as they land (a staged block copied into
      // the model as far as it has come: the tracker is this thread's alone), until all are
      // there or nothing can tell.
      WhileWaiting publish(
          [this](const WaitingCall& c) {
            const auto span = c.arrival ? c.arrival->Span() : std::pair<const char*, const char*>{};
            {
              std::lock_guard<std::mutex> lock(mu);
              call = c;
              this->span = span;
              ready_upto = span.first;
              following = c.arrival != nullptr;
            }
            cv.notify_all();
            if (c.arrival == nullptr) return;
            bool written = true;
            for (const char* p = span.first; written && p < span.second;) {
              p = static_cast<size_t>(span.second - p) > kFollowStride ? p + kFollowStride : span.second;
              written = c.ReplyWrittenUpTo(p);
              if (written) {
                std::lock_guard<std::mutex> lock(mu);
                ready_upto = p;
              }
              cv.notify_all();
            }
            {
              std::lock_guard<std::mutex> lock(mu);
              following = false;
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
    m.span = {};
    m.ready_upto = nullptr;
    m.following = false;
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
  if (call.arrival != nullptr) {
    // Several pservers' calls: the step's thread says how far the values are there.
    if (e <= b || b < m.span.first || e > m.span.second) {
      m.WaitEnded(lock);
      return false;
    }
    m.cv.wait(lock, [&] { return m.ended() || m.ready_upto >= e || !m.following; });
    if (m.ended() || m.ready_upto < e) {
      m.WaitEnded(lock);
      return false;
    }
    m.CountAhead();
    return true;
  }
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
  m.CountAhead();
  return true;
}

Handle BackgroundStep::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->WaitEnded(lock);
  return impl_->result;
}

}  // namespace tessera::api
