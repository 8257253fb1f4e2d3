// A trainer's window: memory its model keeps dense values and gradients in, which its
// shared-memory pservers map too, so a push's gradient is read and a pull's values are written
// there in place instead of being copied through the transport's regions (shm_transport.h).
//
// The hard part is a call that fails: its pserver thread may still read or write the window
// later (a pserver frozen and then thawed, a reply that missed its deadline). So calls travel in
// place only while a caller *holds* the window (it leaves the window alone until its calls end),
// and a failed call in place *renews* it: a new memfd with the same contents takes the old one's
// addresses (mremap), so the model's pointers stay valid and the late thread writes only into
// memory nobody reads any more. A call in place whose window was renewed under it fails too (its
// pserver wrote into the old memory) and is retried like any failed call.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/mutex.h"
#include "tessera/status.h"
#include "transport/stream_io.h"
#include "transport/transport.h"

namespace tessera {

// The largest window: a client refuses to allocate more, a pserver to map more (address space
// only: what a request reads or a reply writes there is bounded by the frame limits).
constexpr size_t kMaxWindowBytes = size_t{1} << 40;

class ShmWindow {
 public:
  ShmWindow() = default;
  ~ShmWindow();
  ShmWindow(const ShmWindow&) = delete;
  ShmWindow& operator=(const ShmWindow&) = delete;

  // Maps `bytes` (> 0) of zeroed memory, page-aligned, once (FailedPrecondition after). A sealed
  // memfd when the system allows it; ordinary memory otherwise (shared() false: nothing travels
  // in place, and the caller sees no difference).
  StatusOr<char*> Allocate(size_t bytes);
  char* base() const { return base_.load(std::memory_order_acquire); }
  bool shared() const { return shared_.load(std::memory_order_acquire); }
  size_t size() const { return size_.load(std::memory_order_acquire); }

  // A word in the window's last cache line, outside every caller's memory: a pserver answering
  // a call in place stores there how much of the reply is written (WaitingCall::progress).
  static constexpr size_t kProgressBytes = 64;
  uint64_t progress_offset() const { return size() - kProgressBytes; }
  std::atomic<uint64_t>* progress_word() const;
  // More such words, each in a cache line of its own before that one, for calls that run at once
  // (a step's call to each pserver): slot i < kProgressSlots, null before Allocate.
  static constexpr int kProgressSlots = 64;
  std::atomic<uint64_t>* progress_slot(int i) const;

  // Where [p, p + n) lies in the window: its offset, or -1 when it does not lie wholly inside.
  int64_t OffsetOf(const void* p, size_t n) const;

  // While a Hold lives, its owner promises not to touch the window until the calls it started
  // end (a trainer waiting for its push and pull). Calls go in place only while one is held.
  class Hold {
   public:
    explicit Hold(ShmWindow* w) : w_(w) {
      if (w_) w_->holds_.fetch_add(1, std::memory_order_acq_rel);
    }
    ~Hold() {
      if (w_) w_->holds_.fetch_sub(1, std::memory_order_acq_rel);
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    ShmWindow* w_;
  };
  bool held() const { return holds_.load(std::memory_order_acquire) > 0; }

  // The generation of the memory now under the window (1 after Allocate, +1 per renewal; 0
  // before; read without the lock) and a duplicate of its descriptor for a peer (invalid when
  // not shared).
  uint64_t generation() const;
  UniqueFd DuplicateFd(uint64_t* generation) const;

  // A call in place that began at `generation` ended well only if the window is still that
  // generation. Checked under the lock a renewal takes, so a renewal is wholly before or after.
  bool Still(uint64_t generation) const;

  // After a call in place at `generation` failed: replaces the memory under the window with a
  // copy (a new memfd; private memory if that fails), unless it was already renewed since. The
  // caller must hold the window.
  Status Renew(uint64_t generation);

 private:
  mutable Mutex mu_;
  std::atomic<char*> base_{nullptr};  // set once by Allocate; the addresses never change
  std::atomic<size_t> size_{0};
  std::atomic<bool> shared_{false};
  std::atomic<int> holds_{0};
  UniqueFd fd_ GUARDED_BY(mu_);
  // Changed under mu_ (with the memory it names); read without it where an answer a moment old
  // does no harm (a connection's check that its pserver maps the current window).
  std::atomic<uint64_t> generation_{0};
};

// The offset in `w` of the run that `bufs` fill one after another (empty ones skipped), or -1
// when they do not lie back to back inside it or hold nothing.
int64_t WindowRunOf(const ShmWindow& w, std::span<const ConstBuffer> bufs);
int64_t WindowRunOf(const ShmWindow& w, std::span<const MutableBuffer> bufs);

// What went in place in this process: calls whose payload the pserver read in the window,
// replies it wrote there, and renewals after failures. For log lines and tests.
struct WindowCounters {
  uint64_t requests_in_place = 0;
  uint64_t replies_in_place = 0;
  uint64_t renewals = 0;
};
WindowCounters WindowCountersNow();
// "in place: 1876 requests, 1875 replies (0 renewals)", or "" when nothing went in place.
std::string WindowSummary(const WindowCounters& c);
void CountWindowRequest();
void CountWindowReply();

}  // namespace tessera
