// Work for a thread while its call waits: see while_waiting.h.
#include "common/while_waiting.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <utility>

namespace tessera {
namespace {
thread_local WhileWaiting* current = nullptr;
}  // namespace

WhileWaiting::WhileWaiting(std::function<void(const WaitingCall&)> work, bool wants_progress)
    : work_(std::move(work)), outer_(current), wants_progress_(wants_progress) {
  current = this;
}

WhileWaiting::~WhileWaiting() { current = outer_; }

void WhileWaiting::RunHere(const WaitingCall& call) {
  WhileWaiting* w = current;
  if (w == nullptr || w->ran_) return;
  w->ran_ = true;  // first: a call the work makes itself runs nothing
  w->work_(call);
}

bool WaitingCall::ReplyWrittenUpTo(const void* p) const {
  const char* c = static_cast<const char*>(p);
  if (!progress || c <= reply_base || c > reply_base + reply_room) return false;
  const uint64_t need = static_cast<uint64_t>(c - reply_base);
  auto written = [&] { return progress->load(std::memory_order_acquire); };
  uint64_t seen = written();
  TimePoint moved = Now();
  // Bounded by the deadline, and by the reply's coming (which ends every call that gets one).
  while (seen < need) {
    pollfd pf{reply_fd, POLLIN, 0};
    const TimePoint now = Now();
    if (reply_fd < 0 || now >= deadline) return written() >= need;
    const bool still = now - moved >= kStillSpin;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    if (::poll(&pf, 1, still ? static_cast<int>(std::min<int64_t>(left, 1000)) : 0) != 0)
      return written() >= need;
    if (!still) sched_yield();
    if (const uint64_t w = written(); w != seen) {
      seen = w;
      moved = Now();
    }
  }
  return true;
}

bool WhileWaiting::WantsProgress() {
  return current != nullptr && !current->ran_ && current->wants_progress_;
}

}  // namespace tessera
