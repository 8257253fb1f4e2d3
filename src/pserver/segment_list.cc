// SegmentList (see segment_list.h).
#include "pserver/segment_list.h"

#include <algorithm>
#include <limits>

#include "job/wire_codec.h"

namespace tessera {
namespace {

std::string DTypeName(int t) {
  const std::string& n = wire::DType_Name(static_cast<wire::DType>(t));
  return n.empty() ? "type " + std::to_string(t) : n;
}

// More floats than any frame may carry: a request claiming this many is refused as inconsistent.
constexpr size_t kMaxFloats = size_t{1} << 40;

}  // namespace

StatusOr<SegmentList> SegmentList::Read(const ShardStore& store, const WireSegments& segments, Use use,
                                        bool wire_formats) {
  SegmentList list;
  list.segments_ = &segments;
  list.block_size_ = store.block_size();
  list.parts_.reserve(static_cast<size_t>(segments.size()));
  for (int i = 0; i < segments.size(); ++i) {
    const wire::Segment& seg = segments[i];
    if (wire_formats ? ValueBytes(seg.dtype()) == 0 : seg.dtype() != wire::FLOAT32) {
      return Status::InvalidArgument("parameter '" + seg.param() + "': dtype " + DTypeName(seg.dtype()) +
                                     " is not supported " +
                                     (wire_formats ? "(the wire carries FLOAT32, BFLOAT16 and FLOAT16)"
                                                   : "here (parameters are FLOAT32)"));
    }
    if (seg.coding() != wire::PLAIN && (!wire_formats || use != Use::kPush)) {
      return Status::InvalidArgument("parameter '" + seg.param() + "': coding " +
                                     wire::Coding_Name(seg.coding()) + " is for pushes only");
    }
    Part p;
    p.index = i;
    p.offset = list.floats_;
    if (seg.block() >= 0) {
      if (seg.keys_size() > 0) {
        return Status::InvalidArgument("segment of '" + seg.param() + "' names block " +
                                       std::to_string(seg.block()) + " and sparse keys");
      }
      TESSERA_RETURN_IF_ERROR(store.CheckDense(seg.param(), seg.block(), seg.count()));
      p.floats = static_cast<size_t>(seg.count());
    } else {
      if (use == Use::kInit) {
        return Status::InvalidArgument("INIT carries dense blocks only, but a segment lists rows of '" +
                                       seg.param() + "' (sparse rows are created on first touch)");
      }
      if (seg.block() != -1) {
        return Status::InvalidArgument("segment of '" + seg.param() + "' names block " +
                                       std::to_string(seg.block()) + " (blocks start at 0; -1 is a sparse segment)");
      }
      if (seg.keys_size() != seg.count()) {
        return Status::InvalidArgument("sparse segment of '" + seg.param() + "' lists " +
                                       std::to_string(seg.keys_size()) + " keys but says " +
                                       std::to_string(seg.count()) + " rows");
      }
      std::span<const uint64_t> keys(seg.keys().data(), static_cast<size_t>(seg.keys_size()));
      TESSERA_RETURN_IF_ERROR(store.CheckSparse(seg.param(), keys));
      p.dense = false;
      p.dim = store.Dim(seg.param());
      p.floats = keys.size() * static_cast<size_t>(p.dim);
    }
    if (p.floats > kMaxFloats - list.floats_) {
      return Status::InvalidArgument("the segments describe more than " + std::to_string(kMaxFloats) + " values");
    }
    auto wire_bytes = SegmentWireBytes(seg, p.floats);
    TESSERA_RETURN_IF_ERROR(wire_bytes.status());
    p.wire_offset = list.wire_bytes_;
    p.wire_bytes = *wire_bytes;
    list.wire_bytes_ += p.wire_bytes;
    list.encoded_ = list.encoded_ || Encoded(seg);
    list.floats_ += p.floats;
    list.parts_.push_back(p);
  }
  return list;
}

Status SegmentList::CheckPayload(size_t payload_bytes) const {
  if (payload_bytes == wire_bytes_) return Status::OK();
  return Status::InvalidArgument("payload has " + std::to_string(payload_bytes) +
                                 " bytes but the header describes " + std::to_string(wire_bytes_));
}

Status SegmentList::Widen(const void* payload, WireSegments* segments, std::string* floats) {
  floats->resize(floats_ * sizeof(float));  // from operator new: aligned for floats
  auto* out = reinterpret_cast<float*>(floats->data());
  const auto* in = static_cast<const char*>(payload);
  for (const Part& p : parts_) {
    TESSERA_RETURN_IF_ERROR(
        DecodeSegment((*segments)[p.index], in + p.wire_offset, p.floats, out + p.offset));
  }
  Widened(segments);
  return Status::OK();
}

bool SegmentList::PlainOf(wire::DType t) const {
  return std::all_of(parts_.begin(), parts_.end(), [&](const Part& p) {
    const wire::Segment& s = segment(p);
    return s.coding() == wire::PLAIN && s.dtype() == t;
  });
}

void SegmentList::Widened(WireSegments* segments) {
  for (Part& p : parts_) {
    wire::Segment& seg = (*segments)[p.index];
    seg.set_dtype(wire::FLOAT32);
    seg.set_coding(wire::PLAIN);
    seg.clear_nonzeros();
    p.wire_offset = p.offset * sizeof(float);
    p.wire_bytes = p.floats * sizeof(float);
  }
  segments_ = segments;
  wire_bytes_ = bytes();
  encoded_ = false;
}

std::string SegmentList::Describe(size_t element) const {
  for (const Part& p : parts_) {
    if (element < p.offset || element >= p.offset + p.floats) continue;
    const wire::Segment& seg = segment(p);
    const size_t at = element - p.offset;
    if (p.dense) {
      // The element within the parameter, as the trainer knows it (a block is the wire's unit).
      return "'" + seg.param() + "' element " +
             std::to_string(seg.block() * block_size_ + static_cast<int64_t>(at));
    }
    return "'" + seg.param() + "' row of key " + std::to_string(seg.keys(static_cast<int>(at / p.dim)));
  }
  return "element " + std::to_string(element) + " (past the segments)";
}

}  // namespace tessera
