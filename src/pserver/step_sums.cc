// StepSums (see step_sums.h).
#include "pserver/step_sums.h"

#include <algorithm>

namespace tessera {

void StepSums::Begin() {
  parts_.clear();
  summed_.clear();
  sparse_.clear();
  index_.clear();
}

void StepSums::AddDense(const std::string* param, int64_t block, int64_t count, const float* grad) {
  parts_.push_back({param, block, count, grad});
}

void StepSums::AddSparse(const std::string& table, std::span<const uint64_t> keys, int dim, const float* g) {
  auto& [table_keys, rows] = sparse_[table];
  auto& index = index_[table];
  for (size_t k = 0; k < keys.size(); ++k) {
    auto [it, inserted] = index.try_emplace(keys[k], table_keys.size());
    if (inserted) {
      table_keys.push_back(keys[k]);
      rows.insert(rows.end(), g + k * dim, g + (k + 1) * dim);
    } else {
      float* row = rows.data() + it->second * dim;
      for (int i = 0; i < dim; ++i) row[i] += g[k * dim + i];
    }
  }
}

const std::vector<StepSums::Block>& StepSums::SumDense() {
  // Group the parts by block; a stable sort keeps contributor order within a block.
  std::stable_sort(parts_.begin(), parts_.end(), [](const Block& x, const Block& y) {
    int c = x.param->compare(*y.param);
    return c != 0 ? c < 0 : x.block < y.block;
  });
  summed_.clear();
  for (size_t i = 0; i < parts_.size();) {
    size_t j = i + 1;
    while (j < parts_.size() && *parts_[j].param == *parts_[i].param && parts_[j].block == parts_[i].block)
      ++j;
    const Block& first = parts_[i];
    if (j == i + 1) {
      summed_.push_back(first);
    } else {
      auto& acc = acc_[{*first.param, first.block}];
      acc.assign(first.grad, first.grad + first.count);
      float* __restrict a = acc.data();
      for (size_t k = i + 1; k < j; ++k) {
        const float* __restrict g = parts_[k].grad;
        for (int64_t e = 0; e < first.count; ++e) a[e] += g[e];
      }
      summed_.push_back({first.param, first.block, first.count, a});
    }
    i = j;
  }
  return summed_;
}

}  // namespace tessera
