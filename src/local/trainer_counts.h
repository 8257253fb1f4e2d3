// How `tessera local`'s --trainers and --min-trainers settle a job's trainer counts (the spec's
// trainers.max and trainers.min): a sync job's first step waits for all of its trainers unless a
// smaller number is given, as `tessera local` always did; beside a spec, the spec's minimum stays
// unless the trainers asked for by flag are fewer. Pure.
#pragma once

#include <optional>

#include "spec/job_spec.h"

namespace tessera::local {

struct TrainerFlags {
  std::optional<int> trainers;      // --trainers, when given
  std::optional<int> min_trainers;  // --min-trainers, when given (0: all of them)
};

// Sets `s`'s trainers.max and trainers.min from what was given; `from_spec`: `s` was read from a
// spec file (its counts are the defaults), else `s` holds `tessera local`'s defaults.
void SettleTrainerCounts(const TrainerFlags& given, bool from_spec, spec::JobSpec* s);

}  // namespace tessera::local
