// DeferredCopies (see deferred_copies.h). A job's parts are made in the order of their places,
// in runs, under the job's lock (the sender's runs as its reply goes, or a writer's, which makes
// the rest); it ends done (every part made) or cancelled (the rest never made).
#include "pserver/deferred_copies.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>

namespace tessera {

class DeferredCopies::Job {
 public:
  enum State : int { kPending, kDone, kCancelled };
  explicit Job(std::vector<Part> parts) : parts_(std::move(parts)) {
    // In the order of their places, so a run makes the reply from its start.
    std::stable_sort(parts_.begin(), parts_.end(),
                     [](const Part& a, const Part& b) { return std::less<void*>()(a.to, b.to); });
  }

  // Makes every part that begins before `end` (whole parts), unless over. Under the job's lock:
  // whoever comes second waits for the first's run, then goes on from where it ended.
  void RunUpTo(const void* end) { Run(end, /*all=*/false); }
  void RunAll() { Run(nullptr, /*all=*/true); }
  // Cancels what is not made yet; waits for a run under way.
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load(std::memory_order_relaxed) == kPending)
      state_.store(kCancelled, std::memory_order_release);
  }
  bool over() const {
    const int s = state_.load(std::memory_order_acquire);
    return s == kDone || s == kCancelled;
  }

 private:
  void Run(const void* end, bool all) {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load(std::memory_order_relaxed) != kPending) return;
    while (next_ < parts_.size() && (all || std::less<const void*>()(parts_[next_].to, end)))
      Copy(parts_[next_++]);
    if (next_ == parts_.size()) state_.store(kDone, std::memory_order_release);
  }
  static void Copy(const Part& p) {
    if (p.convert) {
      p.convert(p.from, p.floats, p.to);
    } else {
      std::memcpy(p.to, p.from, p.floats * sizeof(float));
    }
  }

  std::mutex mu_;
  std::vector<Part> parts_;
  size_t next_ = 0;  // parts before it are made
  std::atomic<int> state_{kPending};
};

void DeferredCopies::Ticket::Run() {
  if (!job_) return;
  job_->RunAll();
  job_.reset();
}

void DeferredCopies::Ticket::RunUpTo(const void* end) {
  if (job_) job_->RunUpTo(end);
}

void DeferredCopies::Ticket::Cancel() {
  if (!job_) return;
  job_->Cancel();
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
  for (auto& j : jobs_) j->RunAll();
  jobs_.clear();
}

size_t DeferredCopies::pending() const {
  return static_cast<size_t>(
      std::count_if(jobs_.begin(), jobs_.end(), [](const std::shared_ptr<Job>& j) { return !j->over(); }));
}

}  // namespace tessera
