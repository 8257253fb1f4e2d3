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
// A job may choose a format per parameter (WireChoice): one for every parameter, others for
// parameters (dense ones, or sparse tables) it names.
// Value types; pure.
#pragma once

#include <map>
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

// A job's wire formats: `all` for every parameter but those `params` names.
struct WireChoice {
  WireChoice() = default;
  WireChoice(WireFormat f) : all(f) {}  // NOLINT: implicit: one format for every parameter

  WireFormat all;
  std::map<std::string, WireFormat, std::less<>> params;

  // "bf16", or the format for every parameter followed by NAME=FORMAT for the ones that differ:
  // "bf16,emb=f32,fc1.weight=topk:0.01" (the first item may be left out: "emb=f32" keeps f32 for
  // the rest). InvalidArgument saying which item is wrong (a bad format, an empty or repeated
  // name, an item after the first without a name).
  static StatusOr<WireChoice> Parse(std::string_view text);
  // As Parse takes it; the named ones in name order.
  std::string ToString() const;
  // For people: what `all` means, and each named parameter's format.
  std::string Describe() const;
  bool operator==(const WireChoice&) const = default;

  const WireFormat& For(std::string_view param) const {
    auto it = params.find(param);
    return it == params.end() ? all : it->second;
  }
  // Every parameter in float32: no format to code.
  bool plain() const;
  // Some parameter's pushes keep what they did not send (topk or sign).
  bool error_feedback() const;
};

}  // namespace tessera
