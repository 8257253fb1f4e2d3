// StepSums: the sums of a sync step (PserverService::ApplyBarrier). Every contributor's gradient
// blocks are added in contributor order and summed block by block in that order (the order fixes
// the float sums' bits, so every replica and every rerun gets the same model); a block only one
// contributor sent is passed through without a copy. Sparse rows are summed by key, each table's
// keys in the order first seen. The buffers are kept and reused from step to step. Pure: no
// locks, threads or I/O; not thread-safe (the service's lock guards it).
#pragma once

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

class StepSums {
 public:
  // A dense gradient block: `count` floats at `grad` for block `block` of parameter `*param`.
  struct Block {
    const std::string* param;
    int64_t block;
    int64_t count;
    const float* grad;
  };
  struct SparseSum {
    std::vector<uint64_t> keys;
    std::vector<float> rows;  // keys.size() rows of the table's dimension
  };

  // Forgets the last step's parts (keeps the buffers).
  void Begin();
  // One contributor's block; the pointers must stay valid until the sums are used.
  void AddDense(const std::string* param, int64_t block, int64_t count, const float* grad);
  // One contributor's rows of `table` (dimension `dim`), one per key.
  void AddSparse(const std::string& table, std::span<const uint64_t> keys, int dim, const float* rows);
  // The dense sums, one per (parameter, block), in that order: a block sent once points at its
  // sender's gradient, a block sent more than once at its sum (held here until the next Begin).
  const std::vector<Block>& SumDense();
  // The sparse sums by table.
  const std::map<std::string, SparseSum>& sparse() const { return sparse_; }

 private:
  std::vector<Block> parts_, summed_;
  std::map<std::pair<std::string, int64_t>, std::vector<float>> acc_;
  std::map<std::string, SparseSum> sparse_;
  std::map<std::string, absl::flat_hash_map<uint64_t, size_t>> index_;  // key -> its row in sparse_
};

}  // namespace tessera
