// Base or delta (see delta_policy.h).
#include "checkpoint/delta_policy.h"

namespace tessera {

CheckpointKindChoice ChooseCheckpointKind(const CheckpointChainState& chain, int64_t shard_gen,
                                          int64_t delta_bytes, const DeltaPolicy& policy) {
  if (policy.max_fraction <= 0) return {false, "deltas are off"};
  if (chain.gen < 0) return {false, "no recorded checkpoint to build on"};
  if (chain.gen != shard_gen) return {false, "a copy since the last recorded checkpoint was not recorded"};
  if (chain.deltas >= policy.max_deltas)
    return {false, "the chain has " + std::to_string(chain.deltas) + " deltas"};
  const double limit = policy.max_fraction * static_cast<double>(chain.base_bytes);
  if (static_cast<double>(chain.delta_bytes + delta_bytes) > limit)
    return {false, "the deltas would pass " + std::to_string(static_cast<int>(policy.max_fraction * 100)) +
                       "% of the base"};
  return {true, ""};
}

}  // namespace tessera
