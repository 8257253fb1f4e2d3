// ParamDecl and ShardSnapshot: what a pserver's shard declares and holds, as plain data: what a
// checkpoint file saves and loads (checkpoint_file.h), what a replica's snapshot carries, and
// what a ShardStore restores from (pserver/shard_store.h). Pure data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/params.h"

namespace tessera {

// A parameter as a shard declares it.
struct ParamDecl {
  std::string name;
  bool sparse = false;
  int64_t size = 0;  // dense: elements
  int dim = 0;       // sparse: row width
  OptimizerConfig optimizer;
  InitializerConfig init;  // sparse
  TableLimits limits;      // sparse
  bool operator==(const ParamDecl&) const = default;
};

// Everything a ShardStore holds, as plain data: what a checkpoint saves and loads. Dense blocks
// and sparse rows keep their optimizer state ([values | state 1 | state 2]) and update counts.
struct ShardSnapshot {
  struct DenseBlock {
    std::string param;
    int64_t block = 0;
    int64_t t = 0;
    std::vector<float> data;
    bool operator==(const DenseBlock&) const = default;
  };
  struct SparseTable {
    std::string param;
    std::vector<uint64_t> keys;  // row order
    std::vector<int64_t> t;      // per row, for adam (else empty)
    std::vector<float> arena;    // rows of dim * (1 + state arrays) floats
    // With limits (TableLimits::any): each row's last update, the table's update count, the
    // admission sketch (AdmissionSketch::Save; admit=N only) and the running counts.
    std::vector<int64_t> last;
    int64_t updates = 0;
    std::vector<uint8_t> sketch;
    int64_t admitted = 0, evicted = 0;
    std::vector<uint64_t> removed;  // a delta's: keys whose rows were dropped
    bool operator==(const SparseTable&) const = default;
  };
  std::vector<ParamDecl> decls;  // sorted by name
  std::vector<DenseBlock> dense;
  std::vector<SparseTable> sparse;
  // A delta (an incremental checkpoint): each sparse table holds only the rows changed since the
  // copy before it, and in `removed` the keys dropped since then; everything else is whole.
  bool delta = false;
  bool operator==(const ShardSnapshot&) const = default;
};

}  // namespace tessera
