// WireFormat (see wire_format.h).
#include "job/wire_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace tessera {

StatusOr<WireFormat> WireFormat::Parse(std::string_view text) {
  static constexpr std::pair<std::string_view, Kind> kNamed[] = {
      {"f32", Kind::kF32}, {"float32", Kind::kF32}, {"bf16", Kind::kBf16}, {"bfloat16", Kind::kBf16},
      {"f16", Kind::kF16}, {"float16", Kind::kF16}, {"sign", Kind::kSign}};
  WireFormat w;
  for (const auto& [name, kind] : kNamed) {
    if (text == name) {
      w.kind = kind;
      return w;
    }
  }
  if (text.starts_with("topk:")) {
    const std::string r(text.substr(5));
    char* end = nullptr;
    const double ratio = r.empty() ? NAN : std::strtod(r.c_str(), &end);
    if (!std::isfinite(ratio) || end != r.c_str() + r.size() || ratio <= 0 || ratio > 1) {
      return Status::InvalidArgument("wire format '" + std::string(text) +
                                     "': topk needs the fraction of elements sent, above 0 and at most 1 "
                                     "(e.g. topk:0.01)");
    }
    w.kind = Kind::kTopK;
    w.ratio = ratio;
    return w;
  }
  return Status::InvalidArgument(
      "wire format '" + std::string(text) +
      "' is not f32, bf16, f16, topk:R (R the fraction sent, e.g. topk:0.01) or sign");
}

std::string WireFormat::ToString() const {
  switch (kind) {
    case Kind::kF32:
      return "f32";
    case Kind::kBf16:
      return "bf16";
    case Kind::kF16:
      return "f16";
    case Kind::kSign:
      return "sign";
    case Kind::kTopK: {
      char buf[48];
      std::snprintf(buf, sizeof buf, "topk:%g", ratio);
      return buf;
    }
  }
  return "f32";
}

std::string WireFormat::Describe() const {
  switch (kind) {
    case Kind::kF32:
      return "f32: every value as float32";
    case Kind::kBf16:
      return "bf16: pushes and pulls in bfloat16";
    case Kind::kF16:
      return "f16: pushes and pulls in float16";
    case Kind::kSign:
      return "sign: pushes as one bit per gradient and a scale, the rest kept for the next step; pulls in "
             "float32 of the values that changed (every one, as a rule)";
    case Kind::kTopK: {
      char buf[224];
      std::snprintf(buf, sizeof buf,
                    "%s: pushes send the largest %g%% of each block's gradients, the rest kept for the next "
                    "step; pulls in float32 of the values that changed (with sgd or adagrad: a few)",
                    ToString().c_str(), ratio * 100);
      return buf;
    }
  }
  return ToString();
}

StatusOr<WireChoice> WireChoice::Parse(std::string_view text) {
  WireChoice c;
  size_t at = 0;
  for (int item = 0; at <= text.size(); ++item) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view one = text.substr(at, comma - at);
    at = comma + 1;
    const size_t eq = one.find('=');
    if (eq == std::string_view::npos) {
      if (item > 0) {
        return Status::InvalidArgument("wire '" + std::string(text) + "': item " + std::to_string(item + 1) +
                                       " ('" + std::string(one) +
                                       "') names no parameter: after the first, each item is "
                                       "NAME=FORMAT (e.g. bf16,emb=f32)");
      }
      TESSERA_ASSIGN_OR_RETURN(c.all, WireFormat::Parse(one));
      continue;
    }
    const std::string name(one.substr(0, eq));
    if (name.empty()) {
      return Status::InvalidArgument("wire '" + std::string(text) + "': item '" + std::string(one) +
                                     "' has no parameter name before '='");
    }
    auto f = WireFormat::Parse(one.substr(eq + 1));
    if (!f.ok()) {
      return Status::InvalidArgument("wire '" + std::string(text) + "', parameter '" + name +
                                     "': " + f.status().message());
    }
    if (!c.params.emplace(name, *f).second) {
      return Status::InvalidArgument("wire '" + std::string(text) + "': parameter '" + name +
                                     "' is named twice");
    }
  }
  return c;
}

std::string WireChoice::ToString() const {
  std::string s = all.ToString();
  for (const auto& [name, f] : params) s += "," + name + "=" + f.ToString();
  return s;
}

std::string WireChoice::Describe() const {
  std::string s = all.Describe();
  if (params.empty()) return s;
  s = "every parameter but those named: " + s;
  for (const auto& [name, f] : params) s += "; " + name + ": " + f.Describe();
  return s;
}

bool WireChoice::plain() const {
  if (!all.plain()) return false;
  for (const auto& [name, f] : params) {
    if (!f.plain()) return false;
  }
  return true;
}

bool WireChoice::error_feedback() const {
  if (all.error_feedback()) return true;
  for (const auto& [name, f] : params) {
    if (f.error_feedback()) return true;
  }
  return false;
}

wire::DType WireFormat::dtype() const {
  switch (kind) {
    case Kind::kBf16:
      return wire::BFLOAT16;
    case Kind::kF16:
      return wire::FLOAT16;
    default:
      return wire::FLOAT32;
  }
}

wire::Coding WireFormat::dense_push_coding() const {
  switch (kind) {
    case Kind::kTopK:
      return wire::TOP_K;
    case Kind::kSign:
      return wire::SIGNS;
    default:
      return wire::PLAIN;
  }
}

}  // namespace tessera
