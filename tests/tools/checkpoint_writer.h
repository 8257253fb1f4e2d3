// What checkpoint_writer --deltas writes at each version, for the writer and the crash test that
// checks what a restart loads (see checkpoint_writer.cc). Test-only.
#pragma once

#include <cstdint>

namespace tessera::testing {

constexpr uint64_t kDeltaRows = 20000;       // rows 0..kDeltaRows-1, set at version 1
constexpr uint64_t kDeltaNewKey = 1000000;   // row kDeltaNewKey + v is added at version v >= 2
constexpr int64_t kDeltaDenseFloats = 4096;  // one dense parameter "w", every value v

// Row `key`'s value at `version` (>= 1): the last version that set it.
inline float DeltaRowValue(uint64_t key, int64_t version) {
  if (key >= kDeltaNewKey) return static_cast<float>(key - kDeltaNewKey);
  // The last v in [2, version] with v % 100 == key % 100, else 1.
  const int64_t r = static_cast<int64_t>(key % 100);
  int64_t v = version - ((version % 100 - r + 100) % 100);
  return static_cast<float>(v >= 2 ? v : 1);
}

// The rows the shard holds at `version`.
inline uint64_t DeltaRowCount(int64_t version) { return kDeltaRows + static_cast<uint64_t>(version - 1); }

}  // namespace tessera::testing
