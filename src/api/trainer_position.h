// TrainerPosition: a trainer's side of consistent checkpoints, as a pure class. It decides at which
// steps the trainer reports its data position to the master (every `checkpoint_steps`, once each,
// never before the first step it pushed to), and what that position is: the tasks it holds, less
// the records it read after the step's push (read to find that a pass ended, say), which are not
// in the model at that version. No I/O, clocks or threads: the session feeds it steps and reads.
// Not thread-safe (the trainer's loop).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/reader.h"

namespace tessera::api {

class TrainerPosition {
 public:
  // `checkpoint_steps` <= 0: no consistent checkpoints, nothing is ever due.
  explicit TrainerPosition(int64_t checkpoint_steps) : every_(checkpoint_steps) {}

  // The trainer's first push goes to `step` (positions before it are not its to report).
  void Joined(int64_t first_step) { first_step_ = first_step; }
  // Whether the job has consistent checkpoints at all.
  bool enabled() const { return every_ > 0; }
  int64_t first_step() const { return first_step_; }
  // `n` records were returned to the trainer while its client was at `step`.
  void RecordReturned(int64_t step, int64_t n = 1);
  // Whether the position at `step` is to be reported now; if so it counts as reported.
  bool Due(int64_t step);
  // The position at `step` of the tasks `held` (oldest first): the records returned after the
  // step's push are taken off the newest tasks.
  std::vector<ReaderHeldTask> PositionAt(int64_t step, std::vector<ReaderHeldTask> held) const;

 private:
  int64_t every_;
  int64_t first_step_ = -1;
  int64_t last_reported_ = -1;
  int64_t returned_step_ = -1;  // the client's step when the records below were returned
  int64_t returned_after_ = 0;
};

}  // namespace tessera::api
