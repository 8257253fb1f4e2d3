// The decisions behind a sparse table's limits (tessera/params.h TableLimits): which new ids get
// a row, how many rows fit a memory budget, and which rows to drop. Pure functions of their
// inputs (no clocks, no randomness beyond hashes), so a backup replaying a primary's pushes
// makes the same decisions and holds the same rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

// Counts pushes of ids that have no row yet, in fixed memory: a count-min sketch of kDepth rows
// of kWidth saturating 8-bit counters with conservative update (only the smallest counters of
// an id grow), so a count is never under the truth. Every kAgeEvery additions all counters are
// halved, so ids seen long ago fade and the sketch never fills up.
class AdmissionSketch {
 public:
  static constexpr int kDepth = 4;
  static constexpr size_t kWidth = 16384;
  static constexpr int64_t kAgeEvery = 10 * static_cast<int64_t>(kWidth);

  AdmissionSketch() : counters_(kDepth * kWidth, 0) {}
  // Counts one push of `key`; returns its estimated count so far (at most 255).
  int Add(uint64_t key);
  // Serialized: the counters, then the additions since the last halving (8 bytes, little end).
  std::vector<uint8_t> Save() const;
  // False (nothing changed) if `bytes` is not a saved sketch.
  bool Load(std::span<const uint8_t> bytes);
  static constexpr size_t Bytes() { return kDepth * kWidth; }

 private:
  std::vector<uint8_t> counters_;
  int64_t adds_ = 0;
};

// admit_prob: whether this push of `key` (the table's `update`-th) admits it. The same inputs
// always give the same answer; over updates an id is admitted with probability `p` per push.
bool AdmitByChance(float p, uint64_t table_hash, uint64_t key, int64_t update);

// The memory one row costs: its floats (`stride`), its key, its update count (adam only) and
// last update (with limits), plus its share of the hash index at the load abseil's
// flat_hash_map keeps.
struct RowBytes {
  int64_t fixed = 0;  // per row, in the arrays
  // The index's slots for `rows` rows (capacity a power of two minus one, at most 7/8 full,
  // each slot 16 bytes and a control byte).
  static int64_t IndexBytes(size_t rows);
};
RowBytes RowCost(int stride, bool tracks_last, bool counts_updates);

// The most rows whose arrays and index fit `budget` bytes (besides `overhead`, e.g. the sketch).
size_t RowsWithinBudget(int64_t budget, int64_t overhead, const RowBytes& cost);

// The rows to drop, in descending row order, given each row's last update `last`, the table's
// current update `now`:
//   - every row with now - last > evict_after (when evict_after > 0);
//   - then, if more than max_rows remain (max_rows > 0), the least recently updated until
//     `keep` remain (ties broken by row number, the newer row kept).
std::vector<size_t> RowsToEvict(std::span<const int64_t> last, int64_t now, int64_t evict_after,
                                size_t max_rows, size_t keep);

}  // namespace tessera
