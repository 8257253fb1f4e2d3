// Whether a pserver's next checkpoint is a whole shard (a base) or a delta: only the sparse rows
// changed since its last recorded checkpoint (dense parameters are always whole). A pure decision
// over what the chain holds and what the shard says a delta would cost; no files, no clocks.
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

// The chain the last recorded checkpoint ends, as the checkpointer knows it.
struct CheckpointChainState {
  // The shard's checkpoint generation the last recorded checkpoint holds (the shard counts one
  // per checkpoint copy and restore); -1: nothing recorded (or loaded) to build on.
  int64_t gen = -1;
  int64_t base_bytes = 0;   // the chain's base file
  int64_t delta_bytes = 0;  // its deltas together
  int deltas = 0;
  bool operator==(const CheckpointChainState&) const = default;
};

struct DeltaPolicy {
  // A new base once the deltas (with the next one) would pass this fraction of the base's size;
  // 0 turns deltas off.
  double max_fraction = 0.5;
  // And at the latest after this many deltas (bounds the files a recovery reads).
  int max_deltas = 16;
};

struct CheckpointKindChoice {
  bool delta = false;
  std::string why;  // why a base, for the log ("" for a delta)
};

// `shard_gen`: the shard's checkpoint generation now (a delta records what changed since the
// chain's generation, so it is only possible while they are the same: a copy that was never
// recorded cleared the shard's record of changes). `delta_bytes`: what a delta would take now.
CheckpointKindChoice ChooseCheckpointKind(const CheckpointChainState& chain, int64_t shard_gen,
                                          int64_t delta_bytes, const DeltaPolicy& policy);

}  // namespace tessera
