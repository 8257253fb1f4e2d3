// FirstNonFinite (see finite.h). Built with -O3 -march: the loop vectorizes.
#include "common/finite.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/work_pool.h"

namespace tessera {

int64_t FirstNonFinite(const float* x, size_t n) {
  // An exponent of all ones (NaN, infinity) carries into the top bit when 2^23 is added to the
  // masked bits; nothing else does. Integer adds and ors over 4096-element chunks vectorize.
  constexpr size_t kChunk = 4096;
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t end = std::min(n, base + kChunk);
    uint32_t any = 0;
    for (size_t i = base; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, x + i, sizeof bits);
      any |= (bits & 0x7f800000u) + 0x00800000u;
    }
    if (!(any & 0x80000000u)) continue;
    for (size_t i = base; i < end; ++i) {
      if (!std::isfinite(x[i])) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

int64_t FirstNonFinite(const float* x, size_t n, WorkPool* pool) {
  constexpr size_t kShared = size_t{1} << 20;
  if (!pool || pool->size() < 2 || n < kShared) return FirstNonFinite(x, n);
  const int parts = pool->size() * 2;
  std::vector<int64_t> first(parts, -1);
  pool->Run(parts, [&](int p) {
    const size_t from = n * static_cast<size_t>(p) / parts, to = n * static_cast<size_t>(p + 1) / parts;
    const int64_t at = FirstNonFinite(x + from, to - from);
    if (at >= 0) first[p] = static_cast<int64_t>(from) + at;
  });
  for (int64_t at : first) {
    if (at >= 0) return at;  // the parts are in order: the first one found is the first
  }
  return -1;
}

std::string NonFiniteGradient(const std::string& where) {
  return "gradient for " + where + " is not finite (NaN or infinity)";
}

}  // namespace tessera
