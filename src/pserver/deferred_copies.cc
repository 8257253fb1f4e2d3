// DeferredCopies (see deferred_copies.h). A job moves once from pending to running (claimed by
// the sender or a writer, whoever comes first) or to cancelled, and from running to done; whoever
// finds it running waits on its state.
#include "pserver/deferred_copies.h"

#include <algorithm>
#include <cstring>

namespace tessera {

class DeferredCopies::Job {
 public:
  enum State : int { kPending, kRunning, kDone, kCancelled };
  explicit Job(std::vector<Part> parts) : parts_(std::move(parts)) {}

  // Claims and runs the copy, or waits until the one who claimed it is done.
  void RunOrWait() {
    int s = kPending;
    if (state_.compare_exchange_strong(s, kRunning, std::memory_order_acquire)) {
      for (const Part& p : parts_) {
        if (p.convert) {
          p.convert(p.from, p.floats, p.to);
        } else {
          std::memcpy(p.to, p.from, p.floats * sizeof(float));
        }
      }
      state_.store(kDone, std::memory_order_release);
      state_.notify_all();
      return;
    }
    WaitWhileRunning(s);
  }
  // Cancels the copy if nobody started it; else waits for it to end.
  void CancelOrWait() {
    int s = kPending;
    if (state_.compare_exchange_strong(s, kCancelled, std::memory_order_acq_rel)) return;
    WaitWhileRunning(s);
  }
  bool over() const {
    const int s = state_.load(std::memory_order_acquire);
    return s == kDone || s == kCancelled;
  }

 private:
  void WaitWhileRunning(int seen) {
    while (seen == kRunning) {
      state_.wait(kRunning, std::memory_order_acquire);
      seen = state_.load(std::memory_order_acquire);
    }
  }

  std::vector<Part> parts_;
  std::atomic<int> state_{kPending};
};

void DeferredCopies::Ticket::Run() {
  if (!job_) return;
  job_->RunOrWait();
  job_.reset();
}

void DeferredCopies::Ticket::Cancel() {
  if (!job_) return;
  job_->CancelOrWait();
  job_.reset();
}

DeferredCopies::Ticket DeferredCopies::Add(std::vector<Part> parts) {
  // Jobs already over are dropped here too, so the list stays as short as the replies in flight.
  std::erase_if(jobs_, [](const std::shared_ptr<Job>& j) { return j->over(); });
  auto job = std::make_shared<Job>(std::move(parts));
  jobs_.push_back(job);
  return Ticket(std::move(job));
}

void DeferredCopies::Flush() {
  for (auto& j : jobs_) j->RunOrWait();
  jobs_.clear();
}

size_t DeferredCopies::pending() const {
  return static_cast<size_t>(
      std::count_if(jobs_.begin(), jobs_.end(), [](const std::shared_ptr<Job>& j) { return !j->over(); }));
}

}  // namespace tessera
