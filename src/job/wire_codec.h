// The bytes of a segment in a job's wire format (wire_format.h): half-precision conversions, and
// the encoders and decoder of a dense block's push (PLAIN, TOP_K, SIGNS; docs/protocol.md, "Wire
// formats"). The trainer encodes (keeping what it did not send, error feedback), the pserver
// decodes into float32 before anything else reads the push. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tessera/data.pb.h"
#include "tessera/status.h"

namespace tessera {

// Bytes per value of a type the wire carries (FLOAT32, BFLOAT16, FLOAT16); 0 for any other.
size_t ValueBytes(wire::DType t);

// Round to nearest, ties to even; NaN stays NaN, a float16 beyond +-65504 becomes infinite.
uint16_t ToBfloat16(float f);
float FromBfloat16(uint16_t h);
uint16_t ToFloat16(float f);
float FromFloat16(uint16_t h);

// `in` as type t at `out` (ValueBytes(t) * in.size() bytes), and back.
void NarrowValues(std::span<const float> in, wire::DType t, void* out);
// NarrowValues to t as a plain function (for copies made later, pserver/deferred_copies.h); null
// for FLOAT32 (a copy) and for a type the wire does not carry.
using NarrowFn = void (*)(const float* in, size_t n, void* out);
NarrowFn NarrowFunction(wire::DType t);
void WidenValues(const void* in, size_t n, wire::DType t, float* out);

// The bytes segment `s` takes in a payload when it stands for `elements` values, or
// InvalidArgument naming the segment (a coding of dense pushes on a sparse segment, a type the
// wire does not carry, more nonzeros than elements).
StatusOr<size_t> SegmentWireBytes(const wire::Segment& s, size_t elements);
// Whether `s` is anything but PLAIN FLOAT32.
inline bool Encoded(const wire::Segment& s) {
  return s.dtype() != wire::FLOAT32 || s.coding() != wire::PLAIN;
}
// Decodes segment `s` (SegmentWireBytes(s, elements) bytes at `in`) into `elements` floats;
// InvalidArgument when a TOP_K index is out of the block or not ascending.
Status DecodeSegment(const wire::Segment& s, const char* in, size_t elements, float* out);

// The elements a top-k push of `n` elements sends: ceil(ratio * n), at least 1.
size_t TopKCount(double ratio, size_t n);

// Encoders with error feedback: `residual` (n values, what earlier pushes did not send) is added
// to `grad`, the sum is encoded and appended to `out`, and what the encoding did not carry stays in
// `residual`. EncodeTopK returns the elements sent (its segment's `nonzeros`): exactly the k
// largest in magnitude up to kExactTopKUpTo elements; in a larger block, at most k of those at or
// above the k/n quantile of an even sample of kTopKSample of them (about k, found in one pass:
// an exact selection took 4 ns an element).
inline constexpr size_t kExactTopKUpTo = 8192;
inline constexpr size_t kTopKSample = 2048;
size_t EncodeTopK(const float* grad, float* residual, size_t n, size_t k, wire::DType t, std::string* out);
void EncodeSigns(const float* grad, float* residual, size_t n, std::string* out);

}  // namespace tessera
