// TrainerPosition (see trainer_position.h).
#include "api/trainer_position.h"

#include <algorithm>

namespace tessera::api {

void TrainerPosition::RecordReturned(int64_t step, int64_t n) {
  if (step != returned_step_) {
    returned_step_ = step;
    returned_after_ = 0;
  }
  returned_after_ += n;
}

bool TrainerPosition::Due(int64_t step) {
  if (every_ <= 0 || step % every_ != 0 || step <= last_reported_ || step < first_step_) return false;
  last_reported_ = step;
  return true;
}

std::vector<ReaderHeldTask> TrainerPosition::PositionAt(int64_t step,
                                                        std::vector<ReaderHeldTask> held) const {
  int64_t unpushed = returned_step_ == step ? returned_after_ : 0;
  for (auto it = held.rbegin(); it != held.rend() && unpushed > 0; ++it) {
    int64_t back = std::min(unpushed, it->offset);
    it->offset -= back;
    unpushed -= back;
  }
  return held;
}

}  // namespace tessera::api
