// ShardStore: one large sparse request shared by the pool's threads (SetPool), in parts (a few
// per thread, so a thread that wakes late takes fewer), one run of the pool per phase:
//  - the check that every key is served here (a hash per key): parts of the positions;
//  - a pull: each part finds and copies the rows of a range of positions;
//  - a push: part p updates the rows of the keys that fall to it (a multiply of the key picks
//    the part), in request order, so a key that appears twice is updated twice in order.
//  - dense updates (ApplyDenseMany): parts of the elements of every block updated, each part's
//    elements updated as one thread would (the optimizers work element by element), and copied
//    into the pull replies waiting for them as they are done.
// The index is only read during a run; keys without a row yet are left to one thread after it,
// which makes their rows in request order (the row numbers one thread would give) and copies or
// updates them. The result is the same bits as one thread's.
#include <algorithm>

#include "common/denormals.h"
#include "job/placement.h"
#include "pserver/optimizer.h"
#include "pserver/shard_store.h"

namespace tessera {
namespace {

// Part p of n parts of [0, size).
std::pair<size_t, size_t> PartOf(size_t size, int n, int p) { return {size * p / n, size * (p + 1) / n}; }

constexpr int kPartsPerThread = 4;
// Elements updated before their copy into pull replies (DenseUpdate::copy_to): 16 KiB of values.
constexpr int64_t kCopyRun = 4096;
// Elements updated between two stores of a reply's progress: 64 KiB of values.
constexpr int64_t kProgressRun = 16384;

// The part (of n) that updates `key`'s row.
int OwnerOf(uint64_t key, int n) {
  return static_cast<int>(((key * 0x9E3779B97F4A7C15ull) >> 32) * static_cast<uint64_t>(n) >> 32);
}

}  // namespace

// Replies written in place whose trainers read them as they come (common/reply_progress.h):
// whether every copy of every block goes to one of them, at the place its reply holds it.
bool ShardStore::EveryCopyInAReplyReadAsItComes() const {
  auto in_replies = [](const DensePiece& p) {
    if (p.copies == 0 || !p.told) return false;
    for (int c = 0; c < p.copies; ++c) {
      const ReplyProgress* r = p.told[c];
      if (!r || !r->Covers(p.copy_to[c] + p.block->length) ||
          reinterpret_cast<const char*>(p.copy_to[c]) < r->base)
        return false;
    }
    return true;
  };
  return !pieces_.empty() && std::all_of(pieces_.begin(), pieces_.end(), in_replies);
}

// The blocks in the order the first reply holds them, on this thread, each reply's bytes written
// so far told after each run (`apply` updates elements [from, to) and writes their copies). At a
// barrier that releases several trainers, each reply is told (the others' blocks come in the same
// order, as theirs are pulled alike; a reply in another order is told up to its first gap). The
// order changes no bit (each block is updated alone), and the pool's second thread would only
// take the core a trainer now computes on.
template <class Apply>
void ShardStore::ApplyInReplyOrder(const Apply& apply) {
  reply_order_.resize(pieces_.size());
  for (size_t i = 0; i < reply_order_.size(); ++i) reply_order_[i] = &pieces_[i];
  std::sort(reply_order_.begin(), reply_order_.end(),
            [](const DensePiece* a, const DensePiece* b) { return a->copy_to[0] < b->copy_to[0]; });
  told_next_.clear();
  auto next_of = [&](const ReplyProgress* r) -> const char*& {
    for (auto& [reply, next] : told_next_)
      if (reply == r) return next;
    told_next_.push_back({r, r->base});
    return told_next_.back().second;
  };
  for (const DensePiece* p : reply_order_) {
    for (int64_t x = 0; x < p->block->length; x += kProgressRun) {
      const int64_t y = std::min(p->block->length, x + kProgressRun);
      apply(p->begin + x, p->begin + y);
      for (int c = 0; c < p->copies; ++c) {
        const char*& next = next_of(p->told[c]);
        if (reinterpret_cast<const char*>(p->copy_to[c] + x) != next) next = nullptr;
        if (!next) continue;
        next = reinterpret_cast<const char*>(p->copy_to[c] + y);
        p->told[c]->WrittenUpTo(next);
      }
    }
  }
}

void ShardStore::ApplyDenseMany(std::span<const DenseUpdate> updates, float scale) {
  BeforeDenseChange();
  pieces_.clear();
  int64_t total = 0;
  for (const auto& u : updates) {
    Dense& d = *dense_.at(*u.param);
    DenseBlock& b = d.blocks.at(u.block);
    pieces_.push_back({&d.decl.optimizer, &b, u.grad, total, u.copy_to, u.copies, u.told});
    total += b.length;
  }
  // A block named twice (a push may) is updated twice, in order: one by one.
  blocks_.clear();
  for (const auto& p : pieces_) blocks_.push_back(p.block);
  std::sort(blocks_.begin(), blocks_.end());
  if (std::adjacent_find(blocks_.begin(), blocks_.end()) != blocks_.end()) {
    for (const auto& u : updates) ApplyDense(*u.param, u.block, u.grad, scale);
    for (const auto& p : pieces_) {  // the values after every update
      for (int c = 0; c < p.copies; ++c)
        std::copy(p.block->data.data(), p.block->data.data() + p.block->length, p.copy_to[c]);
    }
    return;
  }
  for (auto& p : pieces_) ++p.block->t;
  // Elements [from, to) of the update space: each piece's overlap, optimizer state alongside.
  auto apply = [&](int64_t from, int64_t to) {
    auto it = std::upper_bound(pieces_.begin(), pieces_.end(), from,
                               [](int64_t x, const DensePiece& p) { return x < p.begin; });
    for (--it; it != pieces_.end() && it->begin < to; ++it) {
      DenseBlock& b = *it->block;
      const int64_t lo = std::max(from, it->begin) - it->begin;
      const int64_t hi = std::min(to, it->begin + b.length) - it->begin;
      if (hi <= lo) continue;
      const int k = it->optimizer->StateArrays();
      float* w = b.data.data();
      auto update = [&](int64_t x, int64_t y, float* out) {
        ApplyUpdate(*it->optimizer, w + x, it->grad + x, scale, static_cast<size_t>(y - x),
                    k >= 1 ? w + b.length + x : nullptr, k >= 2 ? w + 2 * b.length + x : nullptr, b.t,
                    out ? out + x : nullptr);
      };
      // The first reply waiting gets the values from the update itself.
      if (it->copies <= 1) {
        update(lo, hi, it->copies == 1 ? it->copy_to[0] : nullptr);
        continue;
      }
      // Element by element, so cutting the range changes no bit; each run is copied into the
      // other replies while it is still in the core's cache.
      for (int64_t x = lo; x < hi; x += kCopyRun) {
        const int64_t y = std::min(hi, x + kCopyRun);
        update(x, y, it->copy_to[0]);
        for (int c = 1; c < it->copies; ++c) std::copy(w + x, w + y, it->copy_to[c] + x);
      }
    }
  };
  if (total == 0) return;
  if (EveryCopyInAReplyReadAsItComes()) return ApplyInReplyOrder(apply);
  if (!pool_ || pool_->size() < 2 || total < kParallelFloats) return apply(0, total);
  const int n = pool_->size() * kPartsPerThread;
  pool_->Run(n, [&](int p) {
    // Parts end on a multiple of 16 floats (whole cache lines of one block's arrays).
    auto at = [&](int q) { return q == n ? total : (total * q / n) & ~int64_t{15}; };
    apply(at(p), at(p + 1));
  });
}

size_t ShardStore::FirstForeignKey(uint64_t table_hash, std::span<const uint64_t> keys) const {
  auto first = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      if (slots_.PserverOf(SlotOfKey(table_hash, keys[i], slots_.slots())) != index_) return i;
    return keys.size();
  };
  if (!pool_ || pool_->size() < 2 || keys.size() < kParallelRows) return first(0, keys.size());
  const int n = pool_->size() * kPartsPerThread;
  std::vector<size_t> found(n);
  pool_->Run(n, [&](int p) {
    auto [b, e] = PartOf(keys.size(), n, p);
    found[p] = first(b, e);
  });
  return *std::min_element(found.begin(), found.end());
}

void ShardStore::ReadSparseParallel(Sparse& s, std::span<const uint64_t> keys, float* out) {
  const int dim = s.decl.dim;
  const int n = pool_->size() * kPartsPerThread;
  missing_.assign(n, {});
  pool_->Run(n, [&](int p) {
    auto [b, e] = PartOf(keys.size(), n, p);
    for (size_t i = b; i < e; ++i) {
      auto it = s.rows.find(keys[i]);
      if (it == s.rows.end()) {
        missing_[p].push_back(i);
        continue;
      }
      const float* row = s.arena.data() + it->second * s.stride;
      std::copy(row, row + dim, out + i * dim);
    }
  });
  for (const auto& part : missing_) {  // parts in order: request order
    for (size_t i : part) {
      const float* row = Row(s, keys[i]);
      std::copy(row, row + dim, out + i * dim);
    }
  }
}

void ShardStore::ApplySparseParallel(Sparse& s, std::span<const uint64_t> keys, const float* grads,
                                     float scale) {
  const int dim = s.decl.dim;
  const int k = s.decl.optimizer.StateArrays();
  const int n = pool_->size() * kPartsPerThread;
  missing_.assign(n, {});
  std::vector<int64_t> marked(n, 0);
  // Positions grouped by part, in request order within each (a counting sort).
  part_of_.resize(keys.size());
  std::vector<size_t> start(n + 1, 0);
  for (size_t i = 0; i < keys.size(); ++i) ++start[(part_of_[i] = OwnerOf(keys[i], n)) + 1];
  for (int p = 0; p < n; ++p) start[p + 1] += start[p];
  order_.resize(keys.size());
  {
    std::vector<size_t> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < keys.size(); ++i) order_[fill[part_of_[i]]++] = i;
  }
  auto apply = [&](size_t r, size_t i) {
    float* row = s.arena.data() + r * s.stride;
    const int64_t t = s.counts ? ++s.t[r] : 0;
    ApplyUpdate(s.decl.optimizer, row, grads + i * dim, scale, dim, k >= 1 ? row + dim : nullptr,
                k >= 2 ? row + 2 * dim : nullptr, t);
  };
  pool_->Run(n, [&](int p) {
    const ScopedFlushDenormals flush;  // once for the part's rows
    int64_t m = 0;
    for (size_t j = start[p]; j < start[p + 1]; ++j) {
      const size_t i = order_[j];
      auto it = s.rows.find(keys[i]);
      if (it == s.rows.end()) {
        missing_[p].push_back(i);
        continue;
      }
      const size_t r = it->second;
      if (!s.changed[r]) {
        s.changed[r] = 1;
        ++m;
      }
      apply(r, i);
    }
    marked[p] = m;
  });
  for (int64_t m : marked) s.changed_rows += m;
  // Rows made in request order: merge the threads' lists (each in order) by position.
  std::vector<size_t> later;
  for (const auto& part : missing_) later.insert(later.end(), part.begin(), part.end());
  if (later.empty()) return;
  std::sort(later.begin(), later.end());
  for (size_t i : later) {
    const size_t r = RowIndex(s, keys[i]);
    MarkChanged(s, r);
    apply(r, i);
  }
}

}  // namespace tessera
