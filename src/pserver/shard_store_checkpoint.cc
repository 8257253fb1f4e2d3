// ShardStore: copies for checkpoints and replicas (whole, or deltas of the sparse rows changed
// since the last checkpoint copy), copies of the values for an export, and restoring a whole copy.
#include <algorithm>
#include <limits>

#include "pserver/shard_store.h"

namespace tessera {

ShardSnapshot ShardStore::Snapshot() const { return Copy(false); }

ShardSnapshot ShardStore::CheckpointSnapshot(bool delta) {
  for (const auto& [name, s] : sparse_) delta &= !s->untracked;
  ShardSnapshot snap = Copy(delta);
  for (auto& [name, s] : sparse_) {
    std::fill(s->changed.begin(), s->changed.end(), 0);
    s->changed_rows = 0;
    s->removed.clear();
    s->untracked = false;
  }
  ++checkpoint_gen_;
  return snap;
}

ShardValues ShardStore::ValuesCopy() const {
  ShardValues v;
  for (const auto& [name, d] : dense_) {
    for (const auto& [b, blk] : d->blocks)
      v.dense.emplace(std::make_pair(name, b),
                      std::vector<float>(blk.data.begin(), blk.data.begin() + blk.length));
  }
  for (const auto& [name, s] : sparse_) {
    ShardValues::Table& t = v.sparse[name];
    t.dim = s->decl.dim;
    t.keys = s->keys;
    t.values.resize(s->keys.size() * static_cast<size_t>(t.dim));
    for (size_t r = 0; r < s->keys.size(); ++r) {
      const float* row = s->arena.data() + r * s->stride;
      std::copy(row, row + t.dim, t.values.data() + r * t.dim);
    }
  }
  return v;
}

int64_t ShardValues::bytes() const {
  size_t n = 0;
  for (const auto& [k, d] : dense) n += d.size() * sizeof(float);
  for (const auto& [k, t] : sparse) n += t.keys.size() * sizeof(uint64_t) + t.values.size() * sizeof(float);
  return static_cast<int64_t>(n);
}

ShardSnapshot ShardStore::Copy(bool delta) const {
  ShardSnapshot snap;
  snap.delta = delta;
  snap.decls = Declarations();
  for (const auto& decl : snap.decls) {
    if (!decl.sparse) {
      for (const auto& [b, blk] : dense_.at(decl.name)->blocks)
        snap.dense.push_back({decl.name, b, blk.t, blk.data});
      continue;
    }
    const Sparse& s = *sparse_.at(decl.name);
    ShardSnapshot::SparseTable t{decl.name};
    if (!delta) {
      t.keys = s.keys;
      t.t = s.t;
      t.arena = s.arena;
      t.last = s.last;
    } else {
      const size_t n = static_cast<size_t>(s.changed_rows);
      t.keys.reserve(n);
      t.arena.reserve(n * s.stride);
      if (s.counts) t.t.reserve(n);
      if (s.limited) t.last.reserve(n);
      for (size_t r = 0; r < s.keys.size(); ++r) {
        if (!s.changed[r]) continue;
        t.keys.push_back(s.keys[r]);
        t.arena.insert(t.arena.end(), s.arena.begin() + r * s.stride, s.arena.begin() + (r + 1) * s.stride);
        if (s.counts) t.t.push_back(s.t[r]);
        if (s.limited) t.last.push_back(s.last[r]);
      }
      t.removed = s.removed;
    }
    t.updates = s.updates;
    if (s.sketch) t.sketch = s.sketch->Save();
    t.admitted = s.admitted;
    t.evicted = s.evicted;
    snap.sparse.push_back(std::move(t));
  }
  return snap;
}

int64_t ShardStore::DeltaBytes() const {
  int64_t bytes = 0;
  for (const auto& [name, d] : dense_)
    for (const auto& [b, blk] : d->blocks) bytes += static_cast<int64_t>(blk.data.size() * sizeof(float));
  for (const auto& [name, s] : sparse_) {
    if (s->untracked) return std::numeric_limits<int64_t>::max() / 4;
    bytes += s->changed_rows * RowCost(s->stride, s->limited, s->counts).fixed +
             static_cast<int64_t>(s->removed.size() * sizeof(uint64_t)) +
             (s->sketch ? static_cast<int64_t>(AdmissionSketch::Bytes()) : 0);
  }
  return bytes;
}

Status ShardStore::Restore(const ShardSnapshot& snap) {
  BeforeDenseChange();
  // Build the new state aside and swap it in only when all of it fits.
  ShardStore fresh(index_, job_, slots_);
  for (const auto& d : snap.decls) TESSERA_RETURN_IF_ERROR(fresh.Declare(d));
  size_t blocks = 0;
  for (const auto& [name, d] : fresh.dense_) blocks += d->blocks.size();
  if (blocks != snap.dense.size()) {
    return Status::InvalidArgument("the snapshot has " + std::to_string(snap.dense.size()) +
                                   " dense blocks, this pserver owns " + std::to_string(blocks));
  }
  for (const auto& b : snap.dense) {
    auto it = fresh.dense_.find(b.param);
    if (it == fresh.dense_.end())
      return Status::InvalidArgument("dense parameter '" + b.param + "' is not declared");
    auto blk = it->second->blocks.find(b.block);
    if (blk == it->second->blocks.end()) {
      return Status::InvalidArgument("block " + std::to_string(b.block) + " of '" + b.param +
                                     "' does not belong to pserver " + std::to_string(index_));
    }
    if (b.data.size() != blk->second.data.size()) {
      return Status::InvalidArgument("block " + std::to_string(b.block) + " of '" + b.param + "' has " +
                                     std::to_string(b.data.size()) + " floats, expected " +
                                     std::to_string(blk->second.data.size()));
    }
    blk->second.data = b.data;
    blk->second.t = b.t;
  }
  for (const auto& t : snap.sparse) {
    auto it = fresh.sparse_.find(t.param);
    if (it == fresh.sparse_.end())
      return Status::InvalidArgument("sparse table '" + t.param + "' is not declared");
    Sparse& s = *it->second;
    // Update counts: kept for adam; a snapshot without them (or an older one with them for an
    // optimizer that does not use them) is taken as it is.
    const bool counts_fit =
        s.counts ? t.t.size() == t.keys.size() : (t.t.empty() || t.t.size() == t.keys.size());
    if (!counts_fit || t.arena.size() != t.keys.size() * static_cast<size_t>(s.stride)) {
      return Status::InvalidArgument("sparse table '" + t.param + "': " + std::to_string(t.keys.size()) +
                                     " keys do not match its rows");
    }
    Status owned = fresh.CheckSparse(t.param, t.keys);
    if (!owned.ok()) return owned;
    if (s.limited) {
      // A snapshot from before the table had limits (or from an older format) starts their
      // bookkeeping afresh: every row as if pushed now.
      if (!t.last.empty() && t.last.size() != t.keys.size())
        return Status::InvalidArgument("sparse table '" + t.param + "': last updates do not match its rows");
      if (s.sketch && !t.sketch.empty() && !s.sketch->Load(t.sketch))
        return Status::InvalidArgument("sparse table '" + t.param + "': malformed admission sketch");
      s.updates = t.updates;
      s.last = t.last.empty() ? std::vector<int64_t>(t.keys.size(), t.updates) : t.last;
      s.admitted = t.admitted;
      s.evicted = t.evicted;
    }
    s.keys = t.keys;
    if (s.counts) s.t = t.t;
    s.arena = t.arena;
    s.changed.assign(s.keys.size(), 0);
    s.rows.reserve(std::max(s.max_rows, s.keys.size()));
    for (size_t r = 0; r < s.keys.size(); ++r) {
      if (!s.rows.emplace(s.keys[r], r).second) {
        return Status::InvalidArgument("sparse table '" + t.param + "' has key " + std::to_string(s.keys[r]) +
                                       " twice");
      }
    }
  }
  dense_ = std::move(fresh.dense_);
  sparse_ = std::move(fresh.sparse_);
  ++checkpoint_gen_;
  return Status::OK();
}

}  // namespace tessera
