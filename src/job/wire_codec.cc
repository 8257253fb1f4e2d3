// Wire codecs (see wire_codec.h).
#include "job/wire_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {
namespace {

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

float FromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

std::string Name(const wire::Segment& s) {
  return s.block() >= 0 ? "'" + s.param() + "' block " + std::to_string(s.block())
                        : "'" + s.param() + "' rows";
}

}  // namespace

size_t ValueBytes(wire::DType t) {
  switch (t) {
    case wire::FLOAT32:
      return 4;
    case wire::BFLOAT16:
    case wire::FLOAT16:
      return 2;
    default:
      return 0;
  }
}

uint16_t ToBfloat16(float f) {
  uint32_t x = Bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // a quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float FromBfloat16(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

uint16_t ToFloat16(float f) {
  const uint32_t x = Bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up round to infinity
  if (abs < 0x38800000u) {
    // Below float16's smallest normal (2^-14): a multiple of 2^-24, rounded to even (exact product).
    const auto m = static_cast<uint32_t>(std::nearbyint(FromBits(abs) * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  const uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u;  // exponent 127 -> 15
  return static_cast<uint16_t>(sign | (r >> 13));
}

float FromFloat16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return FromBits(sign | 0x7f800000u | (m << 13));
  return FromBits(sign | ((e + 112u) << 23) | (m << 13));
}

void NarrowValues(std::span<const float> in, wire::DType t, void* out) {
  if (t == wire::FLOAT32) {
    std::memcpy(out, in.data(), in.size() * sizeof(float));
    return;
  }
  auto* o = static_cast<char*>(out);  // payload bytes: stored with memcpy, any alignment
  const bool bf = t == wire::BFLOAT16;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t h = bf ? ToBfloat16(in[i]) : ToFloat16(in[i]);
    std::memcpy(o + 2 * i, &h, sizeof h);
  }
}

void WidenValues(const void* in, size_t n, wire::DType t, float* out) {
  if (t == wire::FLOAT32) {
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
  const auto* p = static_cast<const char*>(in);
  const bool bf = t == wire::BFLOAT16;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, sizeof h);
    out[i] = bf ? FromBfloat16(h) : FromFloat16(h);
  }
}

StatusOr<size_t> SegmentWireBytes(const wire::Segment& s, size_t elements) {
  const size_t vb = ValueBytes(s.dtype());
  if (vb == 0) {
    const std::string& n = wire::DType_Name(s.dtype());
    return Status::InvalidArgument(Name(s) + ": values of type " +
                                   (n.empty() ? std::to_string(s.dtype()) : n) +
                                   " are not carried (FLOAT32, BFLOAT16 or FLOAT16)");
  }
  switch (s.coding()) {
    case wire::PLAIN:
      return elements * vb;
    case wire::TOP_K:
      if (s.block() < 0) return Status::InvalidArgument(Name(s) + ": TOP_K codes dense blocks only");
      if (s.nonzeros() < 0 || static_cast<size_t>(s.nonzeros()) > elements) {
        return Status::InvalidArgument(Name(s) + ": TOP_K sends " + std::to_string(s.nonzeros()) +
                                       " elements of a block of " + std::to_string(elements));
      }
      return static_cast<size_t>(s.nonzeros()) * (sizeof(uint32_t) + vb);
    case wire::SIGNS:
      if (s.block() < 0) return Status::InvalidArgument(Name(s) + ": SIGNS codes dense blocks only");
      return sizeof(float) + (elements + 7) / 8;
    default:
      return Status::InvalidArgument(Name(s) + ": unknown coding " + std::to_string(s.coding()));
  }
}

Status DecodeSegment(const wire::Segment& s, const char* in, size_t elements, float* out) {
  switch (s.coding()) {
    case wire::PLAIN:
      WidenValues(in, elements, s.dtype(), out);
      return Status::OK();
    case wire::TOP_K: {
      const size_t k = static_cast<size_t>(s.nonzeros());
      std::fill(out, out + elements, 0.0f);
      const char* values = in + k * sizeof(uint32_t);
      const size_t vb = ValueBytes(s.dtype());
      int64_t last = -1;
      for (size_t j = 0; j < k; ++j) {
        uint32_t at;
        std::memcpy(&at, in + j * sizeof at, sizeof at);
        if (at >= elements || static_cast<int64_t>(at) <= last) {
          return Status::InvalidArgument(
              Name(s) + ": TOP_K index " + std::to_string(at) + " (entry " + std::to_string(j) + ") is " +
              (at >= elements ? "past the block's " + std::to_string(elements) + " elements"
                              : "not above the one before it"));
        }
        last = at;
        WidenValues(values + j * vb, 1, s.dtype(), out + at);
      }
      return Status::OK();
    }
    case wire::SIGNS: {
      float scale;
      std::memcpy(&scale, in, sizeof scale);
      const auto* bits = reinterpret_cast<const unsigned char*>(in + sizeof scale);
      for (size_t i = 0; i < elements; ++i) out[i] = (bits[i / 8] >> (i % 8)) & 1u ? scale : -scale;
      return Status::OK();
    }
    default:
      return Status::InvalidArgument(Name(s) + ": unknown coding " + std::to_string(s.coding()));
  }
}

size_t TopKCount(double ratio, size_t n) {
  if (n == 0) return 0;
  const auto k = static_cast<size_t>(std::ceil(ratio * static_cast<double>(n)));
  return std::clamp<size_t>(k, 1, n);
}

size_t EncodeTopK(const float* grad, float* residual, size_t n, size_t k, wire::DType t, std::string* out) {
  k = std::min(k, n);
  for (size_t i = 0; i < n; ++i) residual[i] += grad[i];
  // The k largest magnitudes, then in ascending order of index (the decoder checks it).
  thread_local std::vector<uint32_t> order;
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  if (k < n) {
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                     [&](uint32_t a, uint32_t b) { return std::fabs(residual[a]) > std::fabs(residual[b]); });
  }
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  const size_t vb = ValueBytes(t);
  const size_t at = out->size();
  out->resize(at + k * (sizeof(uint32_t) + vb));
  char* idx = out->data() + at;
  char* val = idx + k * sizeof(uint32_t);
  for (size_t j = 0; j < k; ++j) {
    const uint32_t i = order[j];
    std::memcpy(idx + j * sizeof i, &i, sizeof i);
    const float v = residual[i];
    NarrowValues({&v, 1}, t, val + j * vb);
    float sent;
    WidenValues(val + j * vb, 1, t, &sent);
    residual[i] = v - sent;  // 0 in float32; the rounding in half precision
  }
  return k;
}

void EncodeSigns(const float* grad, float* residual, size_t n, std::string* out) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    residual[i] += grad[i];
    sum += std::fabs(residual[i]);
  }
  const float scale = n == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(n));
  const size_t at = out->size();
  out->resize(at + sizeof scale + (n + 7) / 8, '\0');
  std::memcpy(out->data() + at, &scale, sizeof scale);
  auto* bits = reinterpret_cast<unsigned char*>(out->data() + at + sizeof scale);
  for (size_t i = 0; i < n; ++i) {
    const bool up = residual[i] >= 0;
    if (up) bits[i / 8] = static_cast<unsigned char>(bits[i / 8] | (1u << (i % 8)));
    residual[i] -= up ? scale : -scale;
  }
}

}  // namespace tessera
