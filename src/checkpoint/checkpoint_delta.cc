// Delta checkpoints applied to their base (see checkpoint_delta.h).
#include "checkpoint/checkpoint_delta.h"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <map>
#include <memory>

namespace tessera {
namespace {

// The floats per row of `table` by its declaration, or 0 if it is not a declared sparse table.
size_t Stride(const std::vector<ParamDecl>& decls, const std::string& table) {
  for (const auto& d : decls)
    if (d.name == table && d.sparse) return static_cast<size_t>(d.dim) * (1 + d.optimizer.StateArrays());
  return 0;
}

// Per-row arrays (update counts, last updates) are either empty or one per row.
template <typename T>
bool PerRow(const std::vector<T>& v, size_t rows) {
  return v.empty() || v.size() == rows;
}

// One table being brought up to date, delta after delta, with one index of its rows.
class TableMerge {
 public:
  TableMerge(ShardSnapshot::SparseTable t, size_t stride) : t_(std::move(t)), stride_(stride) {}

  Status Apply(const ShardSnapshot::SparseTable& d) {
    auto bad = [&](const std::string& why) {
      return Status::DataLoss("delta of sparse table '" + d.param + "': " + why);
    };
    if (!indexed_) {
      if (t_.arena.size() != t_.keys.size() * stride_ || !PerRow(t_.t, t_.keys.size()) ||
          !PerRow(t_.last, t_.keys.size()))
        return bad("the checkpoint before it has rows of another shape");
      rows_.reserve(t_.keys.size() + d.keys.size());
      for (size_t r = 0; r < t_.keys.size(); ++r) rows_.emplace(t_.keys[r], r);
      indexed_ = true;
    }
    if (d.arena.size() != d.keys.size() * stride_ || !PerRow(d.t, d.keys.size()) ||
        !PerRow(d.last, d.keys.size()))
      return bad("its rows do not match its keys");
    // Counts and last updates are kept for every row or for none: the two must agree.
    const bool counts = !d.t.empty() || !t_.t.empty();
    const bool last = !d.last.empty() || !t_.last.empty();
    if ((counts && ((d.t.empty() && !d.keys.empty()) || (t_.t.empty() && !t_.keys.empty()))) ||
        (last && ((d.last.empty() && !d.keys.empty()) || (t_.last.empty() && !t_.keys.empty()))))
      return bad("its per-row bookkeeping differs from the checkpoint before it");
    for (uint64_t key : d.removed) {
      auto it = rows_.find(key);
      if (it == rows_.end()) continue;  // made and dropped between the two copies
      const size_t r = it->second, end = t_.keys.size() - 1;
      rows_.erase(it);
      if (r != end) {
        std::copy_n(t_.arena.begin() + end * stride_, stride_, t_.arena.begin() + r * stride_);
        t_.keys[r] = t_.keys[end];
        if (counts) t_.t[r] = t_.t[end];
        if (last) t_.last[r] = t_.last[end];
        rows_[t_.keys[r]] = r;
      }
      t_.keys.pop_back();
      t_.arena.resize(end * stride_);
      if (counts) t_.t.pop_back();
      if (last) t_.last.pop_back();
    }
    for (size_t i = 0; i < d.keys.size(); ++i) {
      auto [it, added] = rows_.try_emplace(d.keys[i], t_.keys.size());
      const size_t r = it->second;
      if (added) {
        t_.keys.push_back(d.keys[i]);
        t_.arena.resize(t_.arena.size() + stride_);
        if (counts) t_.t.push_back(0);
        if (last) t_.last.push_back(0);
      }
      std::copy_n(d.arena.begin() + i * stride_, stride_, t_.arena.begin() + r * stride_);
      if (counts) t_.t[r] = d.t[i];
      if (last) t_.last[r] = d.last[i];
    }
    t_.updates = d.updates;
    t_.sketch = d.sketch;
    t_.admitted = d.admitted;
    t_.evicted = d.evicted;
    return Status::OK();
  }

  ShardSnapshot::SparseTable Take() { return std::move(t_); }

 private:
  ShardSnapshot::SparseTable t_;
  size_t stride_;
  bool indexed_ = false;
  absl::flat_hash_map<uint64_t, size_t> rows_;
};

}  // namespace

Status ApplyDeltas(ShardSnapshot* base, std::span<const ShardSnapshot> deltas) {
  if (base->delta) return Status::InvalidArgument("deltas apply to a whole checkpoint, not to a delta");
  std::map<std::string, ShardSnapshot::SparseTable> old;
  for (auto& t : base->sparse) old[t.param] = std::move(t);
  base->sparse.clear();
  std::map<std::string, std::unique_ptr<TableMerge>> tables;
  for (const ShardSnapshot& delta : deltas) {
    if (!delta.delta) return Status::InvalidArgument("not a delta");
    std::map<std::string, std::unique_ptr<TableMerge>> next;  // the tables this delta has
    for (const auto& d : delta.sparse) {
      const size_t stride = Stride(delta.decls, d.param);
      if (stride == 0)
        return Status::DataLoss("delta has rows of '" + d.param + "', not a declared sparse table");
      auto& m = next[d.param];
      if (tables.count(d.param)) {
        m = std::move(tables[d.param]);
      } else {
        m = std::make_unique<TableMerge>(
            old.count(d.param) ? std::move(old[d.param]) : ShardSnapshot::SparseTable{d.param}, stride);
      }
      TESSERA_RETURN_IF_ERROR(m->Apply(d));
    }
    tables = std::move(next);
    base->decls = delta.decls;
    base->dense = delta.dense;
  }
  if (deltas.empty()) {
    for (auto& [name, t] : old) base->sparse.push_back(std::move(t));
    return Status::OK();
  }
  for (auto& [name, m] : tables) base->sparse.push_back(m->Take());
  return Status::OK();
}

}  // namespace tessera
