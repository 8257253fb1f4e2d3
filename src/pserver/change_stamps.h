// ChangeStamps: which elements of a shard's dense blocks changed since a trainer last pulled them,
// so a pull can carry the changed values only (a job whose pushes are sparse, topk or sign, on an
// optimizer where a zero gradient changes nothing: docs/protocol.md, "Wire formats").
//
// Every apply gets a stamp, and each element its gradient touched takes it. A reply's segment
// carries a token (this tracker's id and the stamp the values are at); a later pull names it as
// `since`, and gets the elements stamped after it. A token of another tracker (another pserver
// process, or this one after Reset: values changed in a way not stamped, e.g. initialized or
// restored) or from before the tracking began is not answered by changes: the whole block goes.
// Memory: one uint32 per element of the blocks stamped. Pure; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

class ChangeStamps {
 public:
  // `id`: this tracker's, nonzero (random per process; a new one at each Reset).
  explicit ChangeStamps(uint32_t id) : id_(id) {}

  // Forgets every stamp: tokens handed out before answer whole from now on.
  void Reset(uint32_t new_id);
  // The next apply: the stamp its elements take.
  void BeginApply() { ++stamp_; }
  // In the apply begun last: the elements of (param, block) whose gradient `grad` (n elements)
  // is not zero changed.
  void Applied(const std::string& param, int64_t block, const float* grad, size_t n);
  // The values as they are now.
  uint64_t token() const { return (uint64_t{id_} << 32) | stamp_; }

  // The elements of (param, block) changed after `since`, ascending, into `out`; false when
  // `since` cannot be answered so (another tracker's, from before the tracking began, or 0), or
  // when more than `most` changed (the scan stops there: the whole block is the smaller answer).
  bool ChangedSince(const std::string& param, int64_t block, uint64_t since, std::vector<uint32_t>* out,
                    size_t most = SIZE_MAX) const;

 private:
  uint32_t id_;
  uint32_t stamp_ = 1;  // stamps start above 0 (a block's elements start at 0: unchanged)
  uint32_t base_ = 1;   // tokens before this were handed out before the last Reset
  struct Block {
    std::vector<uint32_t> stamps;  // per element: the last apply that changed it
    uint32_t every = 0;            // the last apply that changed every element (0: none)
  };
  std::map<std::pair<std::string, int64_t>, Block> stamps_;
};

}  // namespace tessera
