// ShardStore: the parameters one pserver holds: the blocks of dense parameters and the rows of
// sparse tables whose slots the slot map gives this pserver, each with its optimizer state.
//
// Validation is separate from mutation: Check* methods never change anything, so a request is
// checked whole before any part of it is applied ("bad input loses nothing").
//
// Not thread-safe: the PserverService serializes access under its lock. Pull replies may copy
// dense blocks after that lock is let go (DeferDenseCopies): every change to dense values first
// finishes those copies.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/shard_snapshot.h"
#include "common/reply_progress.h"
#include "common/work_pool.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "job/slot_map.h"
#include "pserver/deferred_copies.h"
#include "pserver/row_limits.h"
#include "tessera/params.h"
#include "tessera/status.h"

namespace tessera {

// The values alone (no optimizer state), as an export cut copies them (ExportCuts).
struct ShardValues {
  int64_t version = 0;
  std::map<std::pair<std::string, int64_t>, std::vector<float>> dense;  // (param, block) -> values
  struct Table {
    int dim = 0;
    std::vector<uint64_t> keys;  // row order
    std::vector<float> values;   // dim per row
  };
  std::map<std::string, Table> sparse;
  int64_t bytes() const;
};

class ShardStore {
 public:
  ShardStore(int pserver_index, const JobConfig& job, const SlotMap& slots);

  int index() const { return index_; }
  // Threads that share a step's dense updates (ApplyDenseMany) and the rows of one large sparse
  // request (a table without limits): the rows
  // are found and copied or updated in parallel, each row updated by one thread in request
  // order, and the new rows made after, in request order, so the result is the same bits as one
  // thread's (shard_store_parallel.cc). Null
  // (the default) or a pool of one: one thread. Not owned; must outlive the store.
  void SetPool(WorkPool* pool) { pool_ = pool; }
  // Requests with fewer rows than this stay on one thread (handing out work costs ~10 us).
  static constexpr size_t kParallelRows = 4096;

  // Declares a parameter. Idempotent for the same declaration; InvalidArgument if one with the
  // same name differs. Allocates (and zeroes) the dense blocks this pserver owns.
  Status Declare(const ParamDecl& decl);
  bool Declared(const std::string& name) const;
  bool IsSparse(const std::string& name) const { return sparse_.count(name) > 0; }

  // Checks that a dense block reference is valid here and has `count` elements.
  Status CheckDense(const std::string& name, int64_t block, int64_t count) const;
  // Elements per dense block (the job's block size): block b holds elements [b * size, ...).
  int64_t block_size() const { return job_.block_size; }
  // Checks that sparse keys of `table` all belong to this pserver.
  Status CheckSparse(const std::string& table, std::span<const uint64_t> keys) const;
  // Row width of a sparse table. REQUIRES: declared and sparse.
  int Dim(const std::string& table) const;

  // Sets a dense block's values (initialization). REQUIRES: CheckDense passed.
  void SetDense(const std::string& name, int64_t block, const float* values);
  // Applies a gradient sum (scaled by `scale`) to a dense block. REQUIRES: CheckDense passed.
  void ApplyDense(const std::string& name, int64_t block, const float* grad, float scale);
  // ApplyDense of each (at most one per block), the elements shared by the pool's threads when
  // they are many (kParallelFloats): the same bits as one by one.
  // With `copy_to`, the block's new values are also written to each of those `copies` places
  // (a pull's reply waiting for this step), a few thousand elements at a time as they are
  // computed: no second pass over the block after. `told[c]`, where not null, is the progress of
  // the reply copy c lies in, read as it comes (common/reply_progress.h): when every copy of
  // every block is in such a reply, the blocks are updated in the order of the replies and each
  // reply's progress told as it goes.
  struct DenseUpdate {
    const std::string* param;
    int64_t block;
    const float* grad;
    float* const* copy_to = nullptr;
    int copies = 0;
    const ReplyProgress* const* told = nullptr;
  };
  void ApplyDenseMany(std::span<const DenseUpdate> updates, float scale);
  static constexpr int64_t kParallelFloats = int64_t{1} << 16;
  // Applies gradient rows (one per key) to a sparse table, creating rows first touched (with
  // limits: admitted ones; then drops the rows the limits say to).
  void ApplySparse(const std::string& table, std::span<const uint64_t> keys, const float* grads, float scale);
  // The current values of a dense block (stable until the next Set/Apply on it).
  const float* DenseValues(const std::string& name, int64_t block) const;
  int64_t DenseLength(const std::string& name, int64_t block) const;
  // Whether a zero gradient leaves a dense parameter's values as they are (its optimizer keeps
  // no momentum and no weight decay: sgd, adagrad): then a push changes only what it touches.
  bool ZeroGradientKeepsValues(const std::string& name) const;
  // Copies of dense values (DenseValues) into pull replies, to be done after the caller's lock
  // is released (deferred_copies.h): Declare, SetDense, ApplyDense(Many) and Restore first
  // finish every copy registered here, so a copy always gets the values it was registered with.
  DeferredCopies::Ticket DeferDenseCopies(std::vector<DeferredCopies::Part> parts) {
    return deferred_.Add(std::move(parts));
  }
  // Copies rows for `keys` into out (keys.size() * dim floats), creating rows first touched
  // (with limits: an id without a row reads as its initial value and nothing is stored).
  void ReadSparse(const std::string& table, std::span<const uint64_t> keys, float* out);

  // Every declaration held here, sorted by name.
  std::vector<ParamDecl> Declarations() const;

  // A copy of everything held (for a replica; the copy is the only time the caller's lock needs
  // to be held). Changes nothing.
  ShardSnapshot Snapshot() const;
  // A copy of the values held (no optimizer state), for an export. Changes nothing.
  ShardValues ValuesCopy() const;
  // A copy for a checkpoint: whole, or (`delta`) a delta of the sparse rows changed since the
  // last checkpoint copy or restore. Starts a new checkpoint generation: the record of changes
  // restarts empty.
  ShardSnapshot CheckpointSnapshot(bool delta);
  // Counts one per CheckpointSnapshot and Restore: a delta taken at generation g+1 holds the
  // changes since the state of generation g.
  int64_t checkpoint_gen() const { return checkpoint_gen_; }
  // Moves on with every change to dense values (Declare, SetDense, ApplyDense(Many), Restore):
  // values copied out at one generation are still the shard's while it has not moved.
  uint64_t dense_generation() const { return dense_generation_; }
  // What a delta would take now (bytes, roughly as written).
  int64_t DeltaBytes() const;
  // Replaces everything held with `snap` (whole, not a delta). InvalidArgument (nothing changed)
  // if it does not fit this pserver: a block it does not own, wrong lengths, rows of the wrong
  // width. Starts a new checkpoint generation with no changes recorded.
  Status Restore(const ShardSnapshot& snap);

  struct ParamStats {
    std::string name;
    bool sparse;
    int64_t elements;      // dense elements or sparse rows held here
    int64_t bytes;         // dense: values plus optimizer state; sparse: the table's memory
    int64_t admitted = 0;  // sparse: rows created by pushes
    int64_t evicted = 0;   // sparse: rows dropped by the limits
  };
  std::vector<ParamStats> Stats() const;
  int64_t TotalBytes() const;

 private:
  struct DenseBlock {
    int64_t length = 0;
    int64_t t = 0;            // updates applied (adam's step)
    std::vector<float> data;  // [values | state 1 | state 2], `length` each
  };
  struct Dense {
    ParamDecl decl;
    BlockLayout layout;
    std::map<int64_t, DenseBlock> blocks;  // the blocks owned here
  };
  struct Sparse {
    ParamDecl decl;
    uint64_t table_hash = 0;
    int stride = 0;  // floats per row: dim * (1 + state arrays)
    // key -> row number: open addressing (abseil's Swiss table), 2.3x the lookups of
    // std::unordered_map on Zipf keys (bench/sparse_store_bench).
    absl::flat_hash_map<uint64_t, size_t> rows;
    std::vector<float> arena;    // rows, `stride` floats each
    bool counts = false;         // the optimizer needs each row's update count (adam)
    std::vector<int64_t> t;      // counts: updates applied per row (else empty)
    std::vector<uint64_t> keys;  // row number -> key
    // Incremental checkpoints: which rows changed (created or pushed) since the last checkpoint
    // copy, how many, and the keys dropped since then.
    std::vector<uint8_t> changed;
    int64_t changed_rows = 0;
    std::vector<uint64_t> removed;
    // More keys were dropped than `removed` keeps (its length is bounded): the next checkpoint
    // copy must be whole.
    bool untracked = false;
    // Limits (decl.limits.any()); see TableLimits and row_limits.h.
    bool limited = false;
    std::vector<int64_t> last;                // row number -> the table update that last pushed it
    int64_t updates = 0;                      // pushes applied to the table here
    std::unique_ptr<AdmissionSketch> sketch;  // admit=N
    size_t max_rows = 0;                      // budget: the rows that fit (0: no budget)
    int64_t admitted = 0, evicted = 0;
  };
  // The row of `key`, made (initialized) on first touch: its number, or its values.
  size_t RowIndex(Sparse& s, uint64_t key);
  // Sets up a declared table's limits (reserves a budgeted table's memory).
  static void SetUpLimits(Sparse& s);
  // A push's row for `key` in a table with limits: its number, or -1 if the id is not admitted
  // (yet). Makes room within the budget before it creates a row.
  int64_t PushRow(Sparse& s, uint64_t key);
  // Drops the rows RowsToEvict names (the last row moves into each hole).
  static void Evict(Sparse& s, size_t max_rows, size_t keep);
  static int64_t TableBytes(const Sparse& s);
  // A copy: whole, or of the changed rows only.
  ShardSnapshot Copy(bool delta) const;
  static void MarkChanged(Sparse& s, size_t r) {
    if (!s.changed[r]) {
      s.changed[r] = 1;
      ++s.changed_rows;
    }
  }
  float* Row(Sparse& s, uint64_t key) {
    const size_t r = RowIndex(s, key);  // first: it may grow the arena
    return s.arena.data() + r * s.stride;
  }
  // The position of the first key not served here (keys.size(): none); in parallel when large.
  size_t FirstForeignKey(uint64_t table_hash, std::span<const uint64_t> keys) const;
  void ReadSparseParallel(Sparse& s, std::span<const uint64_t> keys, float* out);
  void ApplySparseParallel(Sparse& s, std::span<const uint64_t> keys, const float* grads, float scale);
  bool Parallel(const Sparse& s, size_t rows) const {
    return pool_ && pool_->size() > 1 && !s.limited && rows >= kParallelRows;
  }

  int index_;
  JobConfig job_;
  SlotMap slots_;
  std::unordered_map<std::string, std::unique_ptr<Dense>> dense_;
  std::unordered_map<std::string, std::unique_ptr<Sparse>> sparse_;
  int64_t checkpoint_gen_ = 0;
  uint64_t dense_generation_ = 1;
  // Before dense values change: the registered copies are done, and the generation moves on.
  void BeforeDenseChange() {
    deferred_.Flush();
    ++dense_generation_;
  }
  WorkPool* pool_ = nullptr;
  DeferredCopies deferred_;  // pull replies' copies not done yet
  // Parallel requests' scratch, reused: per part, positions of keys without a row; a push's
  // part per position and positions grouped by part.
  std::vector<std::vector<size_t>> missing_;
  std::vector<int> part_of_;
  std::vector<size_t> order_;
  struct DensePiece {
    const OptimizerConfig* optimizer;
    DenseBlock* block;
    const float* grad;
    int64_t begin;  // the block's first element in the update's element space
    float* const* copy_to;
    int copies;
    const ReplyProgress* const* told;
  };
  std::vector<DensePiece> pieces_;
  // ApplyDenseMany's way for replies read as they come (shard_store_parallel.cc).
  bool EveryCopyInAReplyReadAsItComes() const;
  template <class Apply>
  void ApplyInReplyOrder(const Apply& apply);
  std::vector<const DensePiece*> reply_order_;  // ApplyDenseMany's pieces in the order of a reply in place
  // ApplyDenseMany's replies told as they are written, each with where its written prefix ends
  // (null: past a gap, told no more until the reply is sent).
  std::vector<std::pair<const ReplyProgress*, const char*>> told_next_;
  std::vector<const DenseBlock*> blocks_;  // ApplyDenseMany's check for a block named twice
};

}  // namespace tessera
