// WhileWaiting: work a thread does while one of its calls waits for its reply. A trainer reads its
// next batch while its step's push travels and the pserver applies it, on the trainer's own thread
// (a hand-off to another thread costs more than the reading). The work is installed for the
// calling thread for the scope of a WhileWaiting; a transport that has sent a request calls
// WhileWaiting::RunHere() before it waits, which runs the work once. A call run by another thread
// (a link's thread, a second pserver's call) finds no work there, so the work only ever runs on
// the thread that installed it, and never twice (a retried call, or a call the work makes itself,
// runs nothing). Whether it ran is for the caller to check: a call that failed before its send
// never runs it.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "common/clock.h"

namespace tessera {

struct WaitingCall;

// Where a step's values arrive when they come from several calls at once (a trainer's step to
// two pservers, each reply written in place with its own progress word): the client's, which
// alone knows which call writes which values. Installed for the calling thread for the scope of
// an Arrivals (below); WaitingCall::ReplyWrittenUpTo asks it instead of the one call's word.
class ValuesArrival {
 public:
  virtual ~ValuesArrival() = default;
  // As WaitingCall::ReplyWrittenUpTo, for the values before model address `p`; `here` is the call
  // the asking thread runs (its reply's socket ends a wait on its own word).
  virtual bool WrittenUpTo(const void* p, const WaitingCall& here) const = 0;
  // The memory the step's values go to: from the first one to the end of the last.
  virtual std::pair<const char*, const char*> Span() const = 0;
};

// What the work may know of the call it runs beside.
struct WaitingCall {
  int reply_fd = -1;     // readable once the reply (or a failure) has come
  TimePoint deadline{};  // the call's
  // Over shared memory in the trainer's window with a progress word: the pserver stores there
  // (release) how many bytes of the reply room from `reply_base` are written, in order, as its
  // apply writes them (common/reply_progress.h); null otherwise.
  const std::atomic<uint64_t>* progress = nullptr;
  const char* reply_base = nullptr;
  size_t reply_room = 0;
  // The progress word the caller gave with its first reply buffer (MutableBuffer::progress), told
  // or not (over TCP never): which of the caller's calls this is. Null when it gave none.
  const std::atomic<uint64_t>* caller_word = nullptr;
  // The step's values as they arrive over all its calls, when the client tracks them (above).
  const ValuesArrival* arrival = nullptr;

  // Waits until the reply is written in place up to `p` (true), or until it cannot tell before
  // the call ends: no progress word, `p` outside the reply room, the reply come (or the
  // connection closed) short of `p`, or the call's deadline passed (false). It spins, yielding
  // its core to any thread ready there, while the word moves; after kStillSpin without a move it
  // sleeps until the reply comes (a pserver that does not tell, or waits at a barrier).
  // With an `arrival`, it answers instead, for the values before `p` wherever they come from.
  bool ReplyWrittenUpTo(const void* p) const;
  static constexpr std::chrono::microseconds kStillSpin{1000};
  // For a wait on this call's word (WaitForProgress's `over`): whether the call has ended (its
  // reply come, or the connection closed) or its deadline passed. `still`: it may sleep until
  // the reply comes (at most a second).
  bool Over(bool still) const;
};

// The wait on a progress word that ReplyWrittenUpTo and api::BackgroundStep share: until `word`
// reaches `need` (true), it spins, yielding its core to any thread ready there, while the word
// moves. Between spins it asks `over(false)`, which must not block; after kStillSpin without a
// move it asks `over(true)`, which may sleep a while. `over` returns true when the wait is over
// without the word (the reply came, the call ended, its deadline passed): the result is then
// whether the word reached `need` all the same.
template <class Over>
bool WaitForProgress(const std::atomic<uint64_t>& word, uint64_t need, Over over) {
  auto written = [&] { return word.load(std::memory_order_acquire); };
  uint64_t seen = written();
  TimePoint moved = Now();
  while (seen < need) {
    const bool still = Now() - moved >= WaitingCall::kStillSpin;
    if (over(still)) return written() >= need;
    if (!still) sched_yield();
    if (const uint64_t w = written(); w != seen) {
      seen = w;
      moved = Now();
    }
  }
  return true;
}

class WhileWaiting {
 public:
  // `wants_progress`: the work reads a reply in place as it is written (WaitingCall::progress),
  // so a call in the trainer's window asks its pserver to say how far it has got.
  explicit WhileWaiting(std::function<void(const WaitingCall&)> work, bool wants_progress = false);
  ~WhileWaiting();
  WhileWaiting(const WhileWaiting&) = delete;
  WhileWaiting& operator=(const WhileWaiting&) = delete;

  bool ran() const { return ran_; }

  // For transports, between sending a request and waiting for its reply: runs this thread's
  // work, if it has one that has not run yet.
  static void RunHere(const WaitingCall& call);
  // Whether this thread has work that has not run yet and wants a progress word.
  static bool WantsProgress();

  // For its scope, the work this thread runs sees `arrival` in its WaitingCall (null: none).
  class Arrivals {
   public:
    explicit Arrivals(const ValuesArrival* arrival);
    ~Arrivals();
    Arrivals(const Arrivals&) = delete;
    Arrivals& operator=(const Arrivals&) = delete;

   private:
    const ValuesArrival* outer_;
  };

 private:
  std::function<void(const WaitingCall&)> work_;
  WhileWaiting* outer_;  // an enclosing scope's work, back in place when this one ends
  bool wants_progress_;
  bool ran_ = false;
};

}  // namespace tessera
