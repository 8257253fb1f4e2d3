// AheadPolicy: whether a trainer works on its next batch while its step travels, on values the
// pserver writes in place as it makes them (Model::ComputeAhead, common/while_waiting.h). Worth
// it only where the pserver has a core of its own to apply on while the trainer computes (the
// launcher's judgement, which also turns busy polling on), and where the pserver tells how far it
// has got: one trainer and one pserver over shared memory. Elsewhere (a barrier with other
// trainers, TCP, a pserver's reply copied) the pserver never tells, and a try costs a short spin,
// so after kFutileInARow tries in a row without a word it stops for kRestAfterFutile steps, then
// tries again (the job may have changed: a trainer left). Pure.
#pragma once

#include <cstdint>

namespace tessera::models {

class AheadPolicy {
 public:
  static constexpr int kFutileInARow = 8;
  static constexpr int64_t kRestAfterFutile = 1000;

  explicit AheadPolicy(bool enabled) : enabled_(enabled) {}

  // Whether to try on this step (called once a step).
  bool Try() {
    if (!enabled_) return false;
    if (rest_ > 0) {
      --rest_;
      return false;
    }
    return true;
  }
  // After a try: whether the pserver told anything of its reply's progress.
  void Tried(bool told) {
    futile_ = told ? 0 : futile_ + 1;
    if (futile_ >= kFutileInARow) {
      futile_ = 0;
      rest_ = kRestAfterFutile;
    }
  }

 private:
  bool enabled_;
  int futile_ = 0;    // tries in a row the pserver told nothing in
  int64_t rest_ = 0;  // steps left without trying
};

}  // namespace tessera::models
