// Wire codecs (see wire_codec.h).
#include "job/wire_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera {
namespace {

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
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // a quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float FromBfloat16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t ToFloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up round to infinity
  if (abs < 0x38800000u) {
    // Below float16's smallest normal (2^-14): a multiple of 2^-24, rounded to even (exact product).
    const auto m = static_cast<uint32_t>(std::nearbyint(std::bit_cast<float>(abs) * 16777216.0f));
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
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

namespace {

// The conversions of whole runs, written for the compiler to vectorize (this file is built with
// -O3 for the machine's CPU), and float16's with F16C where the CPU has it (eight at a time; the
// compiler converts them one by one). Same results as the one-value functions above
// (WireCodecTest checks every value).
constexpr size_t kRun = 1024;

void NarrowRun(const float* in, size_t n, bool bf, uint16_t* out) {
  if (bf) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t x;
      std::memcpy(&x, in + i, sizeof x);
      const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
      const uint32_t nan = (x >> 16) | 0x40u;
      out[i] = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
  } else {
    size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {  // the compiler converts one at a time; F16C does eight
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    }
#endif
    for (; i < n; ++i) out[i] = std::bit_cast<uint16_t>(static_cast<_Float16>(in[i]));
  }
}

void WidenRun(const uint16_t* in, size_t n, bool bf, float* out) {
  if (bf) {
    for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
  } else {
    size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
#endif
    for (; i < n; ++i) out[i] = static_cast<float>(std::bit_cast<_Float16>(in[i]));
  }
}

}  // namespace

void NarrowValues(std::span<const float> in, wire::DType t, void* out) {
  if (t == wire::FLOAT32) {
    std::memcpy(out, in.data(), in.size() * sizeof(float));
    return;
  }
  auto* o = static_cast<char*>(out);  // payload bytes: any alignment
  uint16_t run[kRun];
  for (size_t i = 0; i < in.size(); i += kRun) {
    const size_t n = std::min(kRun, in.size() - i);
    NarrowRun(in.data() + i, n, t == wire::BFLOAT16, run);
    std::memcpy(o + 2 * i, run, 2 * n);
  }
}

NarrowFn NarrowFunction(wire::DType t) {
  switch (t) {
    case wire::BFLOAT16:
      return [](const float* in, size_t n, void* out) { NarrowValues({in, n}, wire::BFLOAT16, out); };
    case wire::FLOAT16:
      return [](const float* in, size_t n, void* out) { NarrowValues({in, n}, wire::FLOAT16, out); };
    default:
      return nullptr;
  }
}

void WidenValues(const void* in, size_t n, wire::DType t, float* out) {
  if (t == wire::FLOAT32) {
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
  const auto* p = static_cast<const char*>(in);
  uint16_t run[kRun];
  for (size_t i = 0; i < n; i += kRun) {
    const size_t m = std::min(kRun, n - i);
    std::memcpy(run, p + 2 * i, 2 * m);
    WidenRun(run, m, t == wire::BFLOAT16, out + i);
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

namespace {

// +scale where a bit is set, -scale where not: 32 elements to a word of bits, each value the
// scale's bits with the sign flipped (vectorized, 2x the element-at-a-time loop).
void DecodeSigns(const unsigned char* bits, float scale, size_t n, float* out) {
  const uint32_t s = std::bit_cast<uint32_t>(scale);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint32_t word;
    std::memcpy(&word, bits + i / 8, sizeof word);
    if constexpr (std::endian::native != std::endian::little) word = __builtin_bswap32(word);
    for (uint32_t j = 0; j < 32; ++j) out[i + j] = std::bit_cast<float>(s ^ ((~word >> j & 1u) << 31));
  }
  for (; i < n; ++i) out[i] = (bits[i / 8] >> (i % 8)) & 1u ? scale : -scale;
}

}  // namespace

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
      DecodeSigns(reinterpret_cast<const unsigned char*>(in + sizeof scale), scale, elements, out);
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

namespace {

// residual += grad, and the indices (ascending) of the elements whose new magnitude is at least
// `threshold` (NaN never) into `at`: returns how many. With AVX-512, 16 elements at a time
// (compressed stores); elsewhere one at a time. The same bits and indices either way. (A scan
// with a branch per element took 120 us a block of 64 Ki here, mostly mispredicted branches;
// this one 11 us.)
size_t AddAndFindAtLeast(const float* grad, float* residual, size_t n, float threshold, uint32_t* at) {
  size_t m = 0, i = 0;
#if defined(__AVX512F__)
  const __m512 t = _mm512_set1_ps(threshold);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (; i + 16 <= n; i += 16) {
    const __m512 r = _mm512_add_ps(_mm512_loadu_ps(residual + i), _mm512_loadu_ps(grad + i));
    _mm512_storeu_ps(residual + i, r);
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(r), t, _CMP_GE_OQ);
    _mm512_mask_compressstoreu_epi32(at + m, big, idx);
    m += static_cast<size_t>(std::popcount(static_cast<unsigned>(big)));
    idx = _mm512_add_epi32(idx, sixteen);
  }
#endif
  for (; i < n; ++i) {
    residual[i] += grad[i];
    if (std::fabs(residual[i]) >= threshold) at[m++] = static_cast<uint32_t>(i);
  }
  return m;
}

}  // namespace

size_t EncodeTopK(const float* grad, float* residual, size_t n, size_t k, wire::DType t, std::string* out) {
  k = std::min(k, n);
  auto larger = [&](uint32_t a, uint32_t b) { return std::fabs(residual[a]) > std::fabs(residual[b]); };
  thread_local std::vector<uint32_t> chosen;
  chosen.clear();
  if (n <= kExactTopKUpTo || k == n) {
    // Exactly the k largest.
    for (size_t i = 0; i < n; ++i) residual[i] += grad[i];
    chosen.resize(n);
    for (size_t i = 0; i < n; ++i) chosen[i] = static_cast<uint32_t>(i);
    if (k < n)
      std::nth_element(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(k), chosen.end(), larger);
    chosen.resize(k);
    std::sort(chosen.begin(), chosen.end());  // ascending: the decoder checks it
  } else {
    // About the k largest, in one pass: the threshold is the same quantile of an even sample of
    // the block (kTopKSample magnitudes of residual + grad, taken before the pass adds them), and
    // at most k of the elements above it are kept.
    thread_local std::vector<float> sample;
    sample.resize(kTopKSample);
    const size_t stride = n / kTopKSample;
    for (size_t j = 0; j < kTopKSample; ++j) {
      const size_t i = j * stride + stride / 2;
      sample[j] = std::fabs(residual[i] + grad[i]);
    }
    const size_t above = std::max<size_t>(1, (k * kTopKSample + n - 1) / n);
    std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(above - 1), sample.end(),
                     std::greater<float>());
    const float threshold = sample[above - 1];
    thread_local std::vector<uint32_t> found;  // grown once to the largest block, never shrunk
    if (found.size() < n) found.resize(n);
    chosen.assign(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(AddAndFindAtLeast(
                                                     grad, residual, n, threshold, found.data())));
    if (chosen.size() > k) {
      std::nth_element(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(k), chosen.end(), larger);
      chosen.resize(k);
      std::sort(chosen.begin(), chosen.end());  // ascending again: the decoder checks it
    }
  }
  k = chosen.size();
  const size_t vb = ValueBytes(t);
  const size_t at = out->size();
  out->resize(at + k * (sizeof(uint32_t) + vb));
  char* idx = out->data() + at;
  char* val = idx + k * sizeof(uint32_t);
  std::memcpy(idx, chosen.data(), k * sizeof(uint32_t));
  for (size_t j = 0; j < k; ++j) {
    const uint32_t i = chosen[j];
    const float v = residual[i];
    NarrowValues({&v, 1}, t, val + j * vb);
    float sent;
    WidenValues(val + j * vb, 1, t, &sent);
    residual[i] = v - sent;  // 0 in float32; the rounding in half precision
  }
  return k;
}

void EncodeSigns(const float* grad, float* residual, size_t n, std::string* out) {
  // The magnitudes summed in 16 lanes of floats (two vectors of 8) over runs of kRun, each run's
  // lanes added in double: one float sum is a chain of dependent adds the compiler may not reorder
  // (4 cycles an element). The order is fixed, so the scale is the same every time.
  using Floats = float __attribute__((vector_size(32)));
  using Bits = uint32_t __attribute__((vector_size(32)));
  constexpr size_t kLane = 8;
  double sum = 0;
  for (size_t i = 0; i < n; i += kRun) {
    const size_t end = std::min(n, i + kRun);
    Floats lanes[2] = {};
    size_t j = i;
    for (; j + 2 * kLane <= end; j += 2 * kLane) {
      for (size_t h = 0; h < 2; ++h) {
        Floats r, g;
        std::memcpy(&r, residual + j + h * kLane, sizeof r);
        std::memcpy(&g, grad + j + h * kLane, sizeof g);
        r += g;
        std::memcpy(residual + j + h * kLane, &r, sizeof r);
        lanes[h] += reinterpret_cast<Floats>(reinterpret_cast<Bits>(r) & 0x7fffffffu);  // |r|
      }
    }
    float tail = 0;
    for (; j < end; ++j) {
      residual[j] += grad[j];
      tail += std::fabs(residual[j]);
    }
    for (const Floats& v : lanes)
      for (size_t l = 0; l < kLane; ++l) sum += v[l];
    sum += tail;
  }
  const float scale = n == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(n));
  const size_t at = out->size();
  out->resize(at + sizeof scale + (n + 7) / 8, '\0');
  std::memcpy(out->data() + at, &scale, sizeof scale);
  auto* bits = reinterpret_cast<unsigned char*>(out->data() + at + sizeof scale);
  // 32 elements to a word of bits, little-endian (bit i % 8 of byte i / 8): vectorized, 7x the
  // element-at-a-time loop.
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint32_t word = 0;
    for (uint32_t j = 0; j < 32; ++j) {
      const bool up = residual[i + j] >= 0;
      word |= static_cast<uint32_t>(up) << j;
      residual[i + j] -= up ? scale : -scale;
    }
    const uint32_t le = std::endian::native == std::endian::little ? word : __builtin_bswap32(word);
    std::memcpy(bits + i / 8, &le, sizeof le);
  }
  for (; i < n; ++i) {
    const bool up = residual[i] >= 0;
    bits[i / 8] = static_cast<unsigned char>(bits[i / 8] | (static_cast<unsigned>(up) << (i % 8)));
    residual[i] -= up ? scale : -scale;
  }
}

}  // namespace tessera
