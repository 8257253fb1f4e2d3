// Applying a delta checkpoint to the whole shard before it: what recovery does for each delta of
// a chain, base first. Pure (plain data in, plain data out). Thread-safe (no shared state).
#pragma once

#include <span>

#include "checkpoint/shard_snapshot.h"
#include "tessera/status.h"

namespace tessera {

// Makes `base` (whole) the shard its `deltas` (in order) describe: the last delta's declarations
// and dense blocks; in each sparse table, delta after delta, the removed keys dropped, then the
// delta's rows replacing or joining the table's, and its bookkeeping (update count, sketch,
// counts). Each table's rows are indexed once for the whole chain. Rows keep no particular
// order. DataLoss naming the table if they do not fit together (then `base` is unspecified).
Status ApplyDeltas(ShardSnapshot* base, std::span<const ShardSnapshot> deltas);

}  // namespace tessera
