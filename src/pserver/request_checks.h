// Validation of a data request against the shard it addresses, before anything is applied:
// each segment's dtype, block bounds or sparse keys, the payload size the header describes, and
// where in a push a non-finite gradient sits. Pure functions over a ShardStore; the caller
// holds whatever lock guards the store (the pserver's mu_). Used by PserverService.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pserver/shard_store.h"
#include "tessera/data.pb.h"
#include "tessera/status.h"

namespace tessera {

// The sparse keys a segment lists, without a copy.
inline std::span<const uint64_t> SegmentKeys(const wire::Segment& seg) {
  return {seg.keys().data(), static_cast<size_t>(seg.keys_size())};
}

// The push segments of `req` are FLOAT32, name blocks and keys this shard has, describe exactly
// `payload_bytes` bytes, and a push with gradients carries a sample count.
Status CheckPushSegments(const ShardStore& store, const wire::DataRequest& req, size_t payload_bytes);

// The pull segments of `req` are FLOAT32 and name blocks and keys this shard has.
Status CheckPullSegments(const ShardStore& store, const wire::DataRequest& req);

// The error for a push whose payload element `element` (counted in floats from the start of the
// payload) is NaN or infinite, naming the parameter and the block element or sparse key.
Status NonFiniteGradient(const ShardStore& store, const wire::DataRequest& req, int64_t element);

}  // namespace tessera
