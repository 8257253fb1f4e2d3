// ChangeStamps (see change_stamps.h). Built for this machine's CPU (src/pserver/CMakeLists.txt).
#include "pserver/change_stamps.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <bit>

namespace tessera {
namespace {

// Writes the indices i (ascending) with s[i] > since at `at` (room for n + 16), stopping once more
// than `most` are found; returns how many were written. With AVX-512, 16 stamps at a time
// (compressed stores): a branch per element costs a misprediction for each change.
size_t StampsAbove(const uint32_t* s, size_t n, uint32_t since, size_t most, uint32_t* at) {
  size_t m = 0, i = 0;
#if defined(__AVX512F__)
  const __m512i v = _mm512_set1_epi32(static_cast<int>(since));
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 later = _mm512_cmpgt_epu32_mask(_mm512_loadu_si512(s + i), v);
    _mm512_mask_compressstoreu_epi32(at + m, later, idx);
    m += static_cast<size_t>(std::popcount(static_cast<unsigned>(later)));
    if (m > most) return m;
    idx = _mm512_add_epi32(idx, sixteen);
  }
#endif
  for (; i < n; ++i) {
    if (s[i] > since) {
      at[m++] = static_cast<uint32_t>(i);
      if (m > most) return m;
    }
  }
  return m;
}

}  // namespace

void ChangeStamps::Reset(uint32_t new_id) {
  id_ = new_id;
  stamps_.clear();
  base_ = ++stamp_;
}

void ChangeStamps::Applied(const std::string& param, int64_t block, const float* grad, size_t n) {
  Block& b = stamps_[{param, block}];
  std::vector<uint32_t>& s = b.stamps;
  if (s.size() != n) s.assign(n, 0);
  // A local copy of the stamp: a store into `s` might otherwise change the member (both are
  // uint32_t), and the compiler would reload it at every element instead of vectorizing.
  const uint32_t stamp = stamp_;
  uint32_t* stamps = s.data();
  size_t changed = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool touched = grad[i] != 0.0f;
    stamps[i] = touched ? stamp : stamps[i];
    changed += touched;
  }
  if (changed == n) b.every = stamp_;
}

bool ChangeStamps::ChangedSince(const std::string& param, int64_t block, uint64_t since,
                                std::vector<uint32_t>* out, size_t most) const {
  out->clear();
  const auto since_id = static_cast<uint32_t>(since >> 32);
  const auto since_stamp = static_cast<uint32_t>(since);
  if (since_id != id_ || since_stamp < base_ || since_stamp > stamp_) return false;
  auto it = stamps_.find({param, block});
  if (it == stamps_.end()) return true;  // not touched since the tracking began
  const std::vector<uint32_t>& s = it->second.stamps;
  if (it->second.every > since_stamp) {
    // Every element changed since (sign pushes do that at each step): no scan.
    if (s.size() > most) return false;
    out->resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) (*out)[i] = static_cast<uint32_t>(i);
    return true;
  }
  // The indices of the stamps above `since`, into a buffer grown once; more than `most`: stop.
  thread_local std::vector<uint32_t> found;
  if (found.size() < s.size() + 16) found.resize(s.size() + 16);
  const size_t m = StampsAbove(s.data(), s.size(), since_stamp, most, found.data());
  if (m > most) return false;
  out->assign(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(m));
  return true;
}

}  // namespace tessera
