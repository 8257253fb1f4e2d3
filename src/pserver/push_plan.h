// PlanPush: what the pserver does with a push the consistency machine has judged (its verdict):
// whether it counts, is held for the barrier or applied now, whether the pull riding on it gets
// its reply's payload before the apply, whether a kept piece lets blocks be applied early, and
// whether a replicated sync push waits for its step. Pure: the facts in, the plan out
// (PserverService::CountPush carries it out under its lock).
#pragma once

#include <cstdint>

#include "pserver/consistency.h"

namespace tessera {

struct PushFacts {
  bool stored_piece = false;     // a piece kept, not the push's last missing one
  bool async_piece = false;      // a piece of an async push
  bool version_moved = false;    // the verdict moved the version (an async push became whole)
  int64_t samples = 0;           // the push's sample count (0: a dropped gradient)
  bool in_pieces = false;        // the push comes in pieces
  bool pulls_floats = false;     // the request also pulls values
  bool replicated_sync = false;  // a sync job with replicas
};

struct PushPlan {
  bool late = false;           // its step closed without it: dropped, the trainer resumes later
  bool counts = false;         // a push counted (tessera_pserver_pushes)
  bool new_data = false;       // not a retry: its bytes, and a dropped gradient, are counted
  bool hold = false;           // kept for the barrier (HoldPiece), a copy of what it borrows
  bool hold_complete = false;  // ... and with it the push is whole
  bool apply_now = false;      // async/ssp: applied at once
  bool prepare_pull = false;   // the pull's reply made before the apply, which writes into it
  bool apply_ready = false;    // a kept piece: blocks every sender sent may be applied now
  bool wait_for_step = false;  // answered once its step is applied on every copy
};

PushPlan PlanPush(Consistency::PushVerdict verdict, const PushFacts& f);

}  // namespace tessera
