// SegmentList: a data request's segment list, read once against the shard it addresses. Every
// check that applies to a segment is made here (dtype, the block or keys exist on this shard, the
// element count, counts that add up) and every segment's place in the payload is computed here,
// so the request checks, INIT, pushes, sync barriers, pulls and the naming of a bad value all walk
// the same list the same way, and anything inconsistent is refused before anything is applied.
//
// A list refers to the segments it was read from (it keeps a pointer, not a copy); Rebind() points
// it at the same segments after they were moved (a held push). Pure: reads a ShardStore, whose
// lock the caller holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pserver/shard_store.h"
#include "tessera/data.pb.h"
#include "tessera/status.h"

namespace tessera {

using WireSegments = google::protobuf::RepeatedPtrField<wire::Segment>;

class SegmentList {
 public:
  enum class Use {
    kPush,  // gradients: dense blocks and sparse rows, in the payload
    kPull,  // values wanted: dense blocks and sparse rows, in the reply
    kInit,  // initial values: dense blocks only (sparse rows are created on first touch)
  };
  struct Part {
    int index = 0;      // in the segment list
    bool dense = true;  // a dense block (else sparse rows)
    int dim = 1;        // floats per sparse row
    size_t offset = 0;  // floats from the start of the payload (push, INIT) or the reply (pull)
    size_t floats = 0;  // floats of this segment
    // Where it is on the wire: bytes from the start of the payload or reply, and how many (a job's
    // wire format may narrow or code them; floats * 4 when it is PLAIN FLOAT32).
    size_t wire_offset = 0;
    size_t wire_bytes = 0;
  };

  // InvalidArgument naming the segment (its parameter, block or key) and what is wrong. Segments
  // in a wire format other than PLAIN FLOAT32 are refused unless `wire_formats` (a DATA request's
  // push or pull; job/wire_codec.h): a push may be coded, a pull may ask for half precision.
  static StatusOr<SegmentList> Read(const ShardStore& store, const WireSegments& segments, Use use,
                                    bool wire_formats = false);
  SegmentList() = default;

  // For a push or INIT: the payload holds exactly the bytes the segments describe.
  Status CheckPayload(size_t payload_bytes) const;
  // A push in a wire format: decodes `payload` into `floats` (floats() of them, as bytes) and makes
  // `segments` (the list's own) PLAIN FLOAT32 to match, so that everything after (the scan for
  // non-finite values, holding, applying, replicating) reads float32. InvalidArgument naming the
  // segment when a coded one is malformed. REQUIRES: CheckPayload passed.
  Status Widen(const void* payload, WireSegments* segments, std::string* floats);
  // Whether every segment is PLAIN values of type `t`: the payload then widens value by value
  // into what Widen makes of it (a push widened as it came, pserver/push_widener.h).
  bool PlainOf(wire::DType t) const;
  // Widen for a payload already widened value by value (PlainOf): `segments` made PLAIN FLOAT32.
  void Widened(WireSegments* segments);
  // Whether any segment is in a wire format other than PLAIN FLOAT32.
  bool encoded() const { return encoded_; }
  size_t wire_bytes() const { return wire_bytes_; }

  const std::vector<Part>& parts() const { return parts_; }
  const wire::Segment& segment(const Part& p) const { return (*segments_)[p.index]; }
  std::span<const uint64_t> keys(const Part& p) const {
    const auto& s = segment(p);
    return {s.keys().data(), static_cast<size_t>(s.keys_size())};
  }
  size_t floats() const { return floats_; }
  size_t bytes() const { return floats_ * sizeof(float); }
  bool empty() const { return parts_.empty(); }

  // Where float `element` of the payload belongs, as the trainer names it: "'w1' element 317" (the
  // element within the parameter), "'emb' row of key 42"; for naming a bad value.
  std::string Describe(size_t element) const;

  // The same segments, moved to `segments` (the list's parts still describe them).
  void Rebind(const WireSegments* segments) { segments_ = segments; }

 private:
  const WireSegments* segments_ = nullptr;
  int64_t block_size_ = 0;  // the store's: where a block's elements start in their parameter
  std::vector<Part> parts_;
  size_t floats_ = 0;
  size_t wire_bytes_ = 0;
  bool encoded_ = false;  // a segment is not PLAIN FLOAT32 (its bytes may still add up alike)
};

}  // namespace tessera
