// When busy polling steps aside: see spin_governor.h.
#include "transport/spin_governor.h"

#include <algorithm>

namespace tessera {

bool SpinGovernor::MaySpin() {
  if (left_ == 0) return true;
  --left_;
  return false;
}

void SpinGovernor::Record(const SpinOutcome& outcome) {
  if (outcome.longest_gap >= kLostCore) return BackOff();
  if (outcome.ran_out) {
    good_ = 0;
    if (++run_outs_ >= kRunOutsInARow) BackOff();
    return;
  }
  run_outs_ = 0;
  if (outcome.arrived && ++good_ >= kForgiveAfter) {
    next_ = std::max(kFirstBackOff, next_ / 2);
    good_ = 0;
  }
}

void SpinGovernor::BackOff() {
  left_ = next_;
  next_ = std::min(next_ * 2, kMaxBackOff);
  run_outs_ = 0;
  good_ = 0;
  ++back_offs_;
}

}  // namespace tessera
