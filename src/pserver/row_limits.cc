// Sparse-table limit decisions (see row_limits.h).
#include "pserver/row_limits.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/hash.h"

namespace tessera {

int AdmissionSketch::Add(uint64_t key) {
  size_t at[kDepth];
  int low = 255;
  for (int d = 0; d < kDepth; ++d) {
    at[d] = d * kWidth + Mix64(key + 0x9e3779b97f4a7c15ULL * (d + 1)) % kWidth;
    low = std::min<int>(low, counters_[at[d]]);
  }
  if (low < 255) {
    for (int d = 0; d < kDepth; ++d) {
      if (counters_[at[d]] == low) ++counters_[at[d]];
    }
    ++low;
  }
  if (++adds_ >= kAgeEvery) {
    for (auto& c : counters_) c >>= 1;
    adds_ = 0;
  }
  return low;
}

std::vector<uint8_t> AdmissionSketch::Save() const {
  std::vector<uint8_t> out = counters_;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(adds_) >> (8 * i)));
  return out;
}

bool AdmissionSketch::Load(std::span<const uint8_t> bytes) {
  if (bytes.size() != Bytes() + 8) return false;
  uint64_t adds = 0;
  for (int i = 0; i < 8; ++i) adds |= static_cast<uint64_t>(bytes[Bytes() + i]) << (8 * i);
  if (adds >= static_cast<uint64_t>(kAgeEvery)) return false;
  counters_.assign(bytes.begin(), bytes.begin() + Bytes());
  adds_ = static_cast<int64_t>(adds);
  return true;
}

bool AdmitByChance(float p, uint64_t table_hash, uint64_t key, int64_t update) {
  if (p >= 1) return true;
  const uint64_t h = Mix64(Mix64(table_hash ^ key) + static_cast<uint64_t>(update));
  return static_cast<double>(h >> 11) * 0x1.0p-53 < static_cast<double>(p);
}

int64_t RowBytes::IndexBytes(size_t rows) {
  if (rows == 0) return 0;
  const size_t want = rows + (rows - 1) / 7;                     // at most 7/8 full
  const size_t capacity = ~size_t{0} >> std::countl_zero(want);  // 2^k - 1 >= want
  return static_cast<int64_t>(capacity) * 17;
}

RowBytes RowCost(int stride, bool tracks_last, bool counts_updates) {
  // floats, key (row -> key), the changed-since-the-last-checkpoint flag, the update count for
  // adam, the last update when limits track it
  return RowBytes{static_cast<int64_t>(stride) * 4 + 8 + 1 + (counts_updates ? 8 : 0) +
                  (tracks_last ? 8 : 0)};
}

size_t RowsWithinBudget(int64_t budget, int64_t overhead, const RowBytes& cost) {
  auto bytes = [&](size_t n) {
    return static_cast<int64_t>(n) * cost.fixed + RowBytes::IndexBytes(n) + overhead;
  };
  if (bytes(1) > budget) return 0;
  size_t lo = 1, hi = static_cast<size_t>(budget / std::max<int64_t>(1, cost.fixed)) + 1;
  while (lo + 1 < hi) {  // bytes(lo) fits, bytes(hi) does not
    const size_t mid = lo + (hi - lo) / 2;
    (bytes(mid) <= budget ? lo : hi) = mid;
  }
  return lo;
}

std::vector<size_t> RowsToEvict(std::span<const int64_t> last, int64_t now, int64_t evict_after,
                                size_t max_rows, size_t keep) {
  std::vector<size_t> out;
  std::vector<size_t> live;
  live.reserve(last.size());
  for (size_t r = 0; r < last.size(); ++r) {
    if (evict_after > 0 && now - last[r] > evict_after)
      out.push_back(r);
    else
      live.push_back(r);
  }
  if (max_rows > 0 && live.size() > max_rows && keep < live.size()) {
    // Oldest first; among equals the lower row number (the older row) goes first.
    const size_t drop = live.size() - keep;
    std::nth_element(live.begin(), live.begin() + drop, live.end(),
                     [&](size_t a, size_t b) { return last[a] != last[b] ? last[a] < last[b] : a < b; });
    out.insert(out.end(), live.begin(), live.begin() + drop);
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

}  // namespace tessera
