// A local run's trainer counts from its flags (see trainer_counts.h).
#include "local/trainer_counts.h"

#include <algorithm>

namespace tessera::local {

void SettleTrainerCounts(const TrainerFlags& given, bool from_spec, spec::JobSpec* s) {
  if (given.trainers) s->trainers_max = *given.trainers;
  if (given.min_trainers)
    s->trainers_min = *given.min_trainers > 0 ? *given.min_trainers : s->trainers_max;
  else if (!from_spec)
    s->trainers_min = s->trainers_max;
  else if (given.trainers)
    s->trainers_min = std::min(s->trainers_min, s->trainers_max);
}

}  // namespace tessera::local
