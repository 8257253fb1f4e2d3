// WireFormat: how a job's gradients and values travel between trainers and pservers (the job's
// `--wire`). The pservers' state is float32 whatever the format; only the bytes on the wire change
// (docs/protocol.md, "Wire formats"):
//  - f32: every value as it is (the default).
//  - bf16, f16: pushes and pulls in half precision: rounded to nearest by the sender, widened by
//    the receiver. bf16 keeps float32's range with 8 bits of mantissa; f16 keeps 11 bits within
//    +-65504 (a larger gradient becomes infinite and is refused as non-finite).
//  - topk:R: a dense block's push sends only its R largest-magnitude elements (R a fraction, e.g.
//    0.01), as index and value; what is not sent is kept on the trainer and added to the next
//    step's gradient (error feedback), so nothing is lost over steps. Pulls and sparse rows are
//    float32.
//  - sign: a dense block's push is one bit per element and one scale (the mean magnitude), with
//    error feedback as for topk. Pulls and sparse rows are float32.
// A value type; pure.
#pragma once

#include <string>
#include <string_view>

#include "tessera/data.pb.h"
#include "tessera/status.h"

namespace tessera {

struct WireFormat {
  enum class Kind { kF32, kBf16, kF16, kTopK, kSign };
  Kind kind = Kind::kF32;
  double ratio = 0;  // topk: the fraction of a block's elements sent, in (0, 1]

  // "f32", "bf16", "f16", "topk:0.01", "sign"; InvalidArgument saying what is accepted.
  static StatusOr<WireFormat> Parse(std::string_view text);
  std::string ToString() const;
  // ToString with what it means, for people ("bf16: pushes and pulls in bfloat16").
  std::string Describe() const;
  bool operator==(const WireFormat&) const = default;

  bool plain() const { return kind == Kind::kF32; }
  // The element type of values pulled and of pushed elements (dense values sent, sparse rows).
  wire::DType dtype() const;
  // How a dense block's push is laid out.
  wire::Coding dense_push_coding() const;
  // Whether the trainer keeps what a push did not send (topk, sign).
  bool error_feedback() const { return kind == Kind::kTopK || kind == Kind::kSign; }
};

}  // namespace tessera
