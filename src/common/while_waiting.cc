// Work for a thread while its call waits: see while_waiting.h.
#include "common/while_waiting.h"

#include <poll.h>

#include <algorithm>
#include <utility>

namespace tessera {
namespace {
thread_local WhileWaiting* current = nullptr;
thread_local const ValuesArrival* current_arrival = nullptr;
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
  if (current_arrival == nullptr || call.arrival != nullptr) {
    w->work_(call);
    return;
  }
  WaitingCall with = call;
  with.arrival = current_arrival;
  w->work_(with);
}

bool WaitingCall::Over(bool still) const {
  const TimePoint now = Now();
  if (reply_fd < 0 || now >= deadline) return true;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
  pollfd pf{reply_fd, POLLIN, 0};
  return ::poll(&pf, 1, still ? static_cast<int>(std::min<int64_t>(left, 1000)) : 0) != 0;
}

bool WaitingCall::ReplyWrittenUpTo(const void* p) const {
  if (arrival) return arrival->WrittenUpTo(p, *this);
  const char* c = static_cast<const char*>(p);
  if (!progress || c <= reply_base || c > reply_base + reply_room) return false;
  // Bounded by the deadline, and by the reply's coming (which ends every call that gets one).
  return WaitForProgress(*progress, static_cast<uint64_t>(c - reply_base),
                         [&](bool still) { return Over(still); });
}

WhileWaiting::Arrivals::Arrivals(const ValuesArrival* arrival) : outer_(current_arrival) {
  current_arrival = arrival;
}

WhileWaiting::Arrivals::~Arrivals() { current_arrival = outer_; }

bool WhileWaiting::WantsProgress() {
  return current != nullptr && !current->ran_ && current->wants_progress_;
}

}  // namespace tessera
