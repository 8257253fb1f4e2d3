// DeferredCopies: copies of shard values into pull replies (as they are, or narrowed to a wire
// format's half precision), done after the pserver lets go of its lock. A reply's copy is registered under
// the lock (Add) with the values as they are then; it is done by whichever comes first:
//  - the thread that sends the reply, after unlocking (Ticket::Run), or as it sends it, a run of
//    parts before each run of the reply goes (Ticket::RunUpTo): pulls copy in parallel with each
//    other and with the handling of other requests;
//  - a writer about to change or move values, still under the lock (Flush): it makes what nobody
//    made yet, after waiting for a run under way, so a reply never holds values of a version
//    other than the one it names.
// A ticket dropped before its copy is done cancels the rest (its destination goes with the
// reply), or waits for a writer copying into it.
//
// Thread-safety: Add and Flush under the owner's lock; a Ticket from the thread that holds it.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace tessera {

class DeferredCopies {
 public:
  struct Part {
    const float* from = nullptr;
    void* to = nullptr;
    size_t floats = 0;
    // Writes the floats at `to` in another form (narrowed to half precision: a pull in a wire
    // format); null: copied as they are.
    void (*convert)(const float* from, size_t floats, void* to) = nullptr;
  };

  class Job;

  // One reply's copy; empty (Run does nothing) when default-made or moved from.
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(std::shared_ptr<Job> job) : job_(std::move(job)) {}
    Ticket(Ticket&&) noexcept = default;
    Ticket& operator=(Ticket&& o) noexcept {
      if (this != &o) {
        Cancel();
        job_ = std::move(o.job_);
      }
      return *this;
    }
    ~Ticket() { Cancel(); }
    // Does the copy, or waits for the writer doing it; after this the destination holds it.
    void Run();
    // Does the parts whose places begin before `end` (a reply made as it is sent: each run of it
    // before it goes), or waits for a writer doing them. Run or a writer's Flush does the rest.
    void RunUpTo(const void* end);
    bool empty() const { return job_ == nullptr; }

   private:
    void Cancel();
    std::shared_ptr<Job> job_;
  };

  // Registers a copy of `parts` (their sources stay valid and unchanged until Flush).
  Ticket Add(std::vector<Part> parts);
  // Before values change: every registered copy is done (here, or by the thread under way).
  void Flush();
  // Copies registered and not yet done or cancelled (for tests).
  size_t pending() const;

 private:
  std::vector<std::shared_ptr<Job>> jobs_;
};

}  // namespace tessera
