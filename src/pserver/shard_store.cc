// ShardStore (see shard_store.h).
#include "pserver/shard_store.h"

#include <algorithm>

#include "common/denormals.h"
#include "common/hash.h"
#include "common/logging.h"
#include "pserver/initializer.h"
#include "pserver/optimizer.h"

namespace tessera {

ShardStore::ShardStore(int pserver_index, const JobConfig& job, const SlotMap& slots)
    : index_(pserver_index), job_(job), slots_(slots) {}

bool ShardStore::Declared(const std::string& name) const { return dense_.count(name) || sparse_.count(name); }

Status ShardStore::Declare(const ParamDecl& decl) {
  BeforeDenseChange();
  if (decl.name.empty()) return Status::InvalidArgument("parameter with an empty name");
  TESSERA_RETURN_IF_ERROR(decl.optimizer.Validate().WithContext("parameter '" + decl.name + "'"));
  if (auto it = dense_.find(decl.name); it != dense_.end()) {
    if (it->second->decl == decl) return Status::OK();
    return Status::InvalidArgument("parameter '" + decl.name + "' is already declared differently (dense, " +
                                   std::to_string(it->second->decl.size) + " elements, " +
                                   it->second->decl.optimizer.ToString() + ")");
  }
  if (auto it = sparse_.find(decl.name); it != sparse_.end()) {
    if (it->second->decl == decl) return Status::OK();
    return Status::InvalidArgument("sparse table '" + decl.name + "' is already declared differently (dim " +
                                   std::to_string(it->second->decl.dim) + ", " +
                                   it->second->decl.optimizer.ToString() + ")");
  }
  const int k = decl.optimizer.StateArrays();
  if (!decl.sparse) {
    if (decl.limits.any())
      return Status::InvalidArgument("dense parameter '" + decl.name + "' cannot have table limits");
    if (decl.size < 1)
      return Status::InvalidArgument("dense parameter '" + decl.name + "' needs at least 1 element");
    auto d = std::make_unique<Dense>();
    d->decl = decl;
    d->layout = BlockLayout{decl.size, job_.block_size};
    for (int64_t b = 0; b < d->layout.blocks(); ++b) {
      if (slots_.PserverOf(SlotOfBlock(decl.name, b, slots_.slots())) != index_) continue;
      DenseBlock& blk = d->blocks[b];
      blk.length = d->layout.length(b);
      blk.data.assign(static_cast<size_t>(blk.length) * (1 + k), 0.0f);
      InitState(decl.optimizer, k >= 1 ? blk.data.data() + blk.length : nullptr,
                k >= 2 ? blk.data.data() + 2 * blk.length : nullptr, blk.length);
    }
    dense_[decl.name] = std::move(d);
  } else {
    if (decl.dim < 1 || decl.dim > (1 << 20)) {
      return Status::InvalidArgument("sparse table '" + decl.name + "' needs a row width of 1..1048576");
    }
    auto s = std::make_unique<Sparse>();
    s->decl = decl;
    s->table_hash = Hash64(decl.name);
    s->stride = decl.dim * (1 + k);
    s->counts = decl.optimizer.type == OptimizerConfig::Type::kAdam;
    SetUpLimits(*s);
    sparse_[decl.name] = std::move(s);
  }
  return Status::OK();
}

Status ShardStore::CheckDense(const std::string& name, int64_t block, int64_t count) const {
  auto it = dense_.find(name);
  if (it == dense_.end()) {
    if (sparse_.count(name))
      return Status::InvalidArgument("'" + name + "' is a sparse table, not a dense parameter");
    return Status::InvalidArgument("unknown parameter '" + name + "'");
  }
  const Dense& d = *it->second;
  if (block < 0 || block >= d.layout.blocks()) {
    return Status::InvalidArgument("parameter '" + name + "' has blocks 0.." +
                                   std::to_string(d.layout.blocks() - 1) + ", not block " +
                                   std::to_string(block));
  }
  auto b = d.blocks.find(block);
  if (b == d.blocks.end()) {
    int slot = SlotOfBlock(name, block, slots_.slots());
    return Status::InvalidArgument("block " + std::to_string(block) + " of '" + name + "' is in slot " +
                                   std::to_string(slot) + ", served by pserver " +
                                   std::to_string(slots_.PserverOf(slot)) + ", not pserver " +
                                   std::to_string(index_));
  }
  if (count != b->second.length) {
    return Status::InvalidArgument("parameter '" + name + "' block " + std::to_string(block) + ": expected " +
                                   std::to_string(b->second.length) + " elements, got " +
                                   std::to_string(count));
  }
  return Status::OK();
}

Status ShardStore::CheckSparse(const std::string& table, std::span<const uint64_t> keys) const {
  auto it = sparse_.find(table);
  if (it == sparse_.end()) {
    if (dense_.count(table))
      return Status::InvalidArgument("'" + table + "' is a dense parameter, not a sparse table");
    return Status::InvalidArgument("unknown sparse table '" + table + "'");
  }
  const uint64_t table_hash = TableSlotHash(table);
  const size_t bad = FirstForeignKey(table_hash, keys);
  if (bad == keys.size()) return Status::OK();
  const uint64_t k = keys[bad];
  const int slot = SlotOfKey(table_hash, k, slots_.slots());
  return Status::InvalidArgument("key " + std::to_string(k) + " of table '" + table + "' is in slot " +
                                 std::to_string(slot) + ", served by pserver " +
                                 std::to_string(slots_.PserverOf(slot)) + ", not pserver " +
                                 std::to_string(index_));
}

int ShardStore::Dim(const std::string& table) const { return sparse_.at(table)->decl.dim; }

void ShardStore::SetDense(const std::string& name, int64_t block, const float* values) {
  BeforeDenseChange();
  DenseBlock& b = dense_.at(name)->blocks.at(block);
  std::copy(values, values + b.length, b.data.data());
}

void ShardStore::ApplyDense(const std::string& name, int64_t block, const float* grad, float scale) {
  BeforeDenseChange();
  Dense& d = *dense_.at(name);
  DenseBlock& b = d.blocks.at(block);
  const int k = d.decl.optimizer.StateArrays();
  float* w = b.data.data();
  ++b.t;
  ApplyUpdate(d.decl.optimizer, w, grad, scale, static_cast<size_t>(b.length),
              k >= 1 ? w + b.length : nullptr, k >= 2 ? w + 2 * b.length : nullptr, b.t);
}

size_t ShardStore::RowIndex(Sparse& s, uint64_t key) {
  auto [it, inserted] = s.rows.try_emplace(key, s.keys.size());
  if (inserted) {
    s.arena.resize(s.arena.size() + s.stride);
    if (s.counts) s.t.push_back(0);
    s.keys.push_back(key);
    s.changed.push_back(1);
    ++s.changed_rows;
    float* row = s.arena.data() + it->second * s.stride;
    const int dim = s.decl.dim;
    InitRow(s.decl.init, s.table_hash, key, row, dim);
    const int k = s.decl.optimizer.StateArrays();
    InitState(s.decl.optimizer, k >= 1 ? row + dim : nullptr, k >= 2 ? row + 2 * dim : nullptr, dim);
  }
  return it->second;
}

void ShardStore::ApplySparse(const std::string& table, std::span<const uint64_t> keys, const float* grads,
                             float scale) {
  Sparse& s = *sparse_.at(table);
  if (Parallel(s, keys.size())) return ApplySparseParallel(s, keys, grads, scale);
  const int dim = s.decl.dim;
  const int k = s.decl.optimizer.StateArrays();
  if (s.limited) ++s.updates;
  const ScopedFlushDenormals flush;  // once for the rows (ApplyUpdate's own then costs a read)
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t r;
    if (s.limited) {
      const int64_t got = PushRow(s, keys[i]);
      if (got < 0) continue;  // not admitted (yet): the gradient is dropped
      r = static_cast<size_t>(got);
      s.last[r] = s.updates;
    } else {
      r = RowIndex(s, keys[i]);
    }
    MarkChanged(s, r);
    float* row = s.arena.data() + r * s.stride;
    const int64_t t = s.counts ? ++s.t[r] : 0;
    ApplyUpdate(s.decl.optimizer, row, grads + i * dim, scale, dim, k >= 1 ? row + dim : nullptr,
                k >= 2 ? row + 2 * dim : nullptr, t);
  }
  // Rows unseen for evict_after updates: swept every eighth of that, so none outlives 9/8 of it.
  const int64_t every = std::max<int64_t>(1, s.decl.limits.evict_after / 8);
  if (s.decl.limits.evict_after > 0 && s.updates % every == 0) Evict(s, 0, 0);
}

const float* ShardStore::DenseValues(const std::string& name, int64_t block) const {
  return dense_.at(name)->blocks.at(block).data.data();
}

int64_t ShardStore::DenseLength(const std::string& name, int64_t block) const {
  return dense_.at(name)->blocks.at(block).length;
}

bool ShardStore::ZeroGradientKeepsValues(const std::string& name) const {
  const OptimizerConfig& o = dense_.at(name)->decl.optimizer;
  return o.weight_decay == 0 &&
         (o.type == OptimizerConfig::Type::kSgd || o.type == OptimizerConfig::Type::kAdagrad);
}

void ShardStore::ReadSparse(const std::string& table, std::span<const uint64_t> keys, float* out) {
  Sparse& s = *sparse_.at(table);
  if (Parallel(s, keys.size())) return ReadSparseParallel(s, keys, out);
  const int dim = s.decl.dim;
  for (size_t i = 0; i < keys.size(); ++i) {
    const float* row;
    if (!s.limited) {
      row = Row(s, keys[i]);
    } else if (auto it = s.rows.find(keys[i]); it != s.rows.end()) {
      row = s.arena.data() + it->second * s.stride;
    } else {  // no row (not admitted, or dropped): its initial value, nothing stored
      InitRow(s.decl.init, s.table_hash, keys[i], out + i * dim, dim);
      continue;
    }
    std::copy(row, row + dim, out + i * dim);
  }
}

std::vector<ParamDecl> ShardStore::Declarations() const {
  std::vector<ParamDecl> out;
  for (const auto& [name, d] : dense_) out.push_back(d->decl);
  for (const auto& [name, s] : sparse_) out.push_back(s->decl);
  std::sort(out.begin(), out.end(), [](const ParamDecl& a, const ParamDecl& b) { return a.name < b.name; });
  return out;
}

std::vector<ShardStore::ParamStats> ShardStore::Stats() const {
  std::vector<ParamStats> out;
  for (const auto& [name, d] : dense_) {
    int64_t elements = 0, bytes = 0;
    for (const auto& [b, blk] : d->blocks) {
      elements += blk.length;
      bytes += static_cast<int64_t>(blk.data.size() * sizeof(float));
    }
    out.push_back({name, false, elements, bytes, 0, 0});
  }
  for (const auto& [name, s] : sparse_) {
    out.push_back(
        {name, true, static_cast<int64_t>(s->rows.size()), TableBytes(*s), s->admitted, s->evicted});
  }
  std::sort(out.begin(), out.end(), [](const ParamStats& a, const ParamStats& b) { return a.name < b.name; });
  return out;
}

int64_t ShardStore::TotalBytes() const {
  int64_t n = 0;
  for (const auto& p : Stats()) n += p.bytes;
  return n;
}

}  // namespace tessera
