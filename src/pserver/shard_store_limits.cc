// ShardStore: a sparse table's limits (admission, eviction, memory budget); the decisions are
// row_limits.h's, this file keeps the rows in step with them.
#include <algorithm>

#include "pserver/initializer.h"
#include "pserver/optimizer.h"
#include "pserver/shard_store.h"

namespace tessera {

void ShardStore::SetUpLimits(Sparse& s) {
  const TableLimits& l = s.decl.limits;
  s.limited = l.any();
  if (!s.limited) return;
  if (l.admit_after > 1) s.sketch = std::make_unique<AdmissionSketch>();
  if (l.budget_bytes > 0) {
    const int64_t overhead = s.sketch ? static_cast<int64_t>(AdmissionSketch::Bytes()) : 0;
    s.max_rows =
        std::max<size_t>(1, RowsWithinBudget(l.budget_bytes, overhead, RowCost(s.stride, true, s.counts)));
    // The arrays never grow past the budget: reserve them once (pages are touched only as rows
    // are written), so no doubling ever holds twice the table.
    s.arena.reserve(s.max_rows * s.stride);
    if (s.counts) s.t.reserve(s.max_rows);
    s.keys.reserve(s.max_rows);
    s.changed.reserve(s.max_rows);
    s.last.reserve(s.max_rows);
    s.rows.reserve(s.max_rows);
  }
}

int64_t ShardStore::PushRow(Sparse& s, uint64_t key) {
  if (auto it = s.rows.find(key); it != s.rows.end()) return static_cast<int64_t>(it->second);
  const TableLimits& l = s.decl.limits;
  if (s.sketch && s.sketch->Add(key) < l.admit_after) return -1;
  if (!AdmitByChance(l.admit_prob, s.table_hash, key, s.updates)) return -1;
  if (s.max_rows > 0 && s.rows.size() >= s.max_rows) Evict(s, s.max_rows - 1, s.max_rows * 9 / 10);
  ++s.admitted;
  const size_t r = RowIndex(s, key);
  s.last.push_back(s.updates);
  return static_cast<int64_t>(r);
}

void ShardStore::Evict(Sparse& s, size_t max_rows, size_t keep) {
  const std::vector<size_t> gone = RowsToEvict(s.last, s.updates, s.decl.limits.evict_after, max_rows, keep);
  for (size_t r : gone) {  // descending: the last row is never one still to drop
    const size_t end = s.keys.size() - 1;
    s.rows.erase(s.keys[r]);
    if (!s.untracked) s.removed.push_back(s.keys[r]);
    s.changed_rows -= s.changed[r];
    if (r != end) {
      std::copy_n(s.arena.data() + end * s.stride, s.stride, s.arena.data() + r * s.stride);
      if (s.counts) s.t[r] = s.t[end];
      s.keys[r] = s.keys[end];
      s.changed[r] = s.changed[end];
      s.last[r] = s.last[end];
      s.rows[s.keys[r]] = r;
    }
    s.arena.resize(end * s.stride);
    if (s.counts) s.t.pop_back();
    s.keys.pop_back();
    s.changed.pop_back();
    s.last.pop_back();
  }
  s.evicted += static_cast<int64_t>(gone.size());
  // Without checkpoints nobody clears `removed`: past as many keys as the table has rows (at
  // least 64 Ki), the next checkpoint is whole instead.
  if (s.removed.size() > std::max<size_t>(s.keys.size(), 1 << 16)) {
    s.removed = {};
    s.untracked = true;
  }
}

int64_t ShardStore::TableBytes(const Sparse& s) {
  return static_cast<int64_t>(s.keys.size()) * RowCost(s.stride, s.limited, s.counts).fixed +
         RowBytes::IndexBytes(s.rows.size()) +
         (s.sketch ? static_cast<int64_t>(AdmissionSketch::Bytes()) : 0);
}

}  // namespace tessera
