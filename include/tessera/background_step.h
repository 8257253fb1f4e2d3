// BackgroundStep: a step's push and pull run on a thread of its own, so that the caller goes on
// (reads its next batch, begins its forward) while the step travels, and waits only for the values
// it is about to use. Where the step's call goes in place in the trainer's window, the pserver
// says how far it has written the reply (common/while_waiting.h, WaitingCall::progress), and
// ValuesReady returns as soon as the values in a range are the step's: the next
// forward begins on the first layer while the pserver still writes the others. With several
// pservers reached over shared memory, the step's thread follows every call's values as they land
// (client/arriving_values.h) and says how far they are there. Elsewhere it waits for the whole
// step. Python's Optimizer.step(wait=False) runs its steps so (python/_tessera.cc).
//
// Thread-safe for one caller thread (Start, ValuesReady, Wait) beside the step's own. Public
// (the Python module's); implemented in src/api/background_step.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "tessera/client.h"

namespace tessera::api {

class BackgroundStep {
 public:
  BackgroundStep();
  // Waits for a step on its way, and ends the thread.
  ~BackgroundStep();
  BackgroundStep(const BackgroundStep&) = delete;
  BackgroundStep& operator=(const BackgroundStep&) = delete;

  // Runs `step` (a blocking push and pull, e.g. Client::PushPullAndWait: whatever it reads must
  // stay valid until Wait) on the step's thread, with work installed there that tells this object
  // where the call's reply is written (WhileWaiting, asking for progress). The step before must
  // have been waited for.
  void Start(std::function<Handle()> step);
  bool in_flight() const;

  // Blocks until the values in [begin, end) are the step's: true when they were written in place
  // while the step was on its way (the caller may read them now, the step not yet ended), false
  // when the step has ended or nothing can tell before it ends (not in place, the range not
  // wholly inside the call's reply or, over several pservers, the step's values, no step): then
  // Wait() says how it went. (A reply in place is one run of the window holding one pserver's
  // blocks only, so a range inside it is all written by that pserver, in order.)
  bool ValuesReady(const void* begin, const void* end);

  // Waits for the step to end: its handle (Handle::Wait returns at once). A default Handle when
  // no step was started.
  Handle Wait();

  // Steps whose values were given out early (ValuesReady true) since this object was made.
  uint64_t steps_ahead() const;

  // A waiter spins (yielding its core) while the written prefix moves; after 1 ms without a move
  // it sleeps in slices of kSleep between looks (common/while_waiting.h, WaitForProgress).
  static constexpr std::chrono::microseconds kSleep{100};

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::api
