// ArrivingValues: a trainer's step to several pservers at once, each call answered in place in
// the trainer's window as its pserver makes the values, and told in a progress word of its own,
// so the next step's work may read each value as soon as it has landed, whichever call brings it
// (common/while_waiting.h, ValuesArrival).
//
// A call goes in place only if its payload and its reply each fill one run of the window. With
// two pservers they do not: the dense blocks alternate between them in the model's memory. Such a
// call is *staged*: its push gathered into a run of the window's staging area (by the link,
// before it is sent), its reply written into another run, and each block copied from there into
// the model's values as far as it is written and needed -- by the work that needs it first, the
// rest by Finish after the call.
// Copying through the staging area costs what a copied call costs (the push gathered, the reply
// copied once), and tells the values' progress, which a copied call cannot.
//
// Not thread-safe but for Ended (from the calls' threads): WrittenUpTo and Finish run on the
// thread that waits for the step.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "client/request_builder.h"
#include "common/while_waiting.h"
#include "transport/shm_window.h"

namespace tessera {

class ArrivingValues : public ValuesArrival {
 public:
  // Two runs of `bytes` each in the window, for staged pushes and replies.
  struct Staging {
    char* push = nullptr;
    char* pull = nullptr;
    size_t bytes = 0;
  };

  // Takes a step's calls (calls[i] to pserver i) before they are dispatched. Where at least two
  // of them pull dense values, every one of their buffers lies in the window, and the staging
  // area holds what must be staged: stages what does not fill one run, gives each such call a
  // progress word (ShmWindow::progress_slot(i)) and an `on_end` that tells this, and returns the
  // tracker. Otherwise null, and the calls are left as they were.
  static std::shared_ptr<ArrivingValues> Track(std::vector<std::unique_ptr<LinkCall>>& calls,
                                               const ShmWindow& window, const Staging& staging);

  // The values before model address `p` are the next step's: each piece before it written (a
  // staged one copied into the model). False when it will not be known before its call ends (the
  // call ended short of it, was answered by a copy, or its deadline, `here`'s, passed).
  bool WrittenUpTo(const void* p, const WaitingCall& here) const override;
  std::pair<const char*, const char*> Span() const override;
  // Call i has finished, well or not (from any thread).
  void Ended(int call);
  // After every call has ended: with `ok` (each succeeded), copies the staged pieces not copied
  // yet into the values, and every staged piece when `again` (a call was sent again after a
  // failure: its reply was written anew). Nothing without `ok`.
  void Finish(bool ok, bool again);

  // For tests: how many calls are staged, and how many pieces WrittenUpTo copied whole.
  int staged_calls() const { return staged_calls_; }
  size_t copied_ahead() const { return copied_ahead_; }

 private:
  struct Piece {
    char* values = nullptr;      // where it goes in the model
    const char* from = nullptr;  // where its pserver writes it (== values unless staged)
    size_t bytes = 0;
    size_t end = 0;  // its end, in bytes from its call's reply room
    int call = 0;
    bool staged = false;
    size_t copied = 0;  // a staged piece's bytes copied into the values so far
  };
  struct Call {
    std::atomic<uint64_t>* word = nullptr;
    std::atomic<bool> ended{false};
  };
  explicit ArrivingValues(size_t calls) : calls_(calls) {}
  // Waits until piece `pc`'s call has written `need` bytes of its reply.
  bool Await(const Piece& pc, size_t need, const WaitingCall& here) const;

  std::vector<Call> calls_;
  mutable std::vector<Piece> pieces_;  // by address in the model
  mutable size_t next_ = 0;            // pieces before it are wholly there
  mutable size_t copied_ahead_ = 0;
  int staged_calls_ = 0;
};

}  // namespace tessera
