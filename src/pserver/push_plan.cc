// PlanPush (see push_plan.h).
#include "pserver/push_plan.h"

namespace tessera {

PushPlan PlanPush(Consistency::PushVerdict verdict, const PushFacts& f) {
  using V = Consistency::PushVerdict;
  PushPlan p;
  p.late = verdict == V::kLate;
  p.new_data = verdict == V::kHold || verdict == V::kApply;
  // An async piece counts once its push is whole (the version moved); any other push once it is
  // not a piece kept for later.
  p.counts = p.new_data && (f.async_piece ? f.version_moved : !f.stored_piece);
  p.hold = verdict == V::kHold;
  p.hold_complete = p.hold && !f.stored_piece;
  p.apply_now = verdict == V::kApply && f.samples > 0;
  // A whole push with a pull: the apply it may bring about writes the reply's dense blocks.
  p.prepare_pull = (p.hold || p.apply_now) && !f.in_pieces && f.pulls_floats;
  p.apply_ready = f.stored_piece;
  // With replicas a sync push is answered once it counts (its step applied on every copy): until
  // then a primary that is lost takes it with it, and the trainer must send it again.
  p.wait_for_step = f.replicated_sync;
  return p;
}

}  // namespace tessera
