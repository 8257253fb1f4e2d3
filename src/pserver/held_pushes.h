// HeldPushes: the sync step's pushes held until its barrier, one per trainer, each in pieces (a
// push not sent in pieces is piece 0). A piece keeps its segments and a list over them, and its
// gradients: borrowed from the request being handled while it is handled (a piece used up there,
// its step closed or its blocks applied, is never copied) and copied only if still needed after
// (KeepBorrowed). Entries stay between steps so their buffers are reused instead of allocated
// every step. With StepPieces (which blocks every sender sent) and StepSums (their sums) this is
// the sync step's state. Pure: no locks, threads, clocks or I/O (the service's lock guards it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pserver/segment_list.h"
#include "tessera/data.pb.h"
#include "transport/transport.h"

namespace tessera {

class HeldPushes {
 public:
  struct Piece {
    bool present = false;
    // Every dense block in it was applied before the barrier and it holds no sparse rows: its
    // gradients are not needed again (and not copied).
    bool spent = false;
    google::protobuf::RepeatedPtrField<wire::Segment> segments;
    SegmentList list;  // over `segments`
    std::string payload;
    const char* borrowed = nullptr;  // the request's payload while it is handled
    size_t borrowed_size = 0;
    const float* data() const { return reinterpret_cast<const float*>(borrowed ? borrowed : payload.data()); }
  };
  struct Push {
    bool held = false;  // the push counts (every piece arrived); the barrier sums it
    int64_t samples = 0;
    std::vector<Piece> pieces;  // by piece index
    int used = 0;               // pieces[0, used) may be present
  };

  // Keeps piece `index` of `trainer`'s push: its segments (swapped out of `segments`), their
  // list, and `payload` (borrowed until KeepBorrowed). `counted`: the push is now complete.
  // Returns true when this push opened the step (the first one held).
  bool Hold(const std::string& trainer, int index, int64_t samples,
            google::protobuf::RepeatedPtrField<wire::Segment>* segments, SegmentList list,
            ConstBuffer payload, bool counted);
  // `trainer`'s push for the step counts, with nothing in it (pieces it sent before go). Returns
  // true when this push opened the step.
  bool HoldEmpty(const std::string& trainer);
  // Forgets the pieces `trainer` sent for the step (a push that stands for a dropped gradient).
  void Drop(const std::string& trainer);
  // Copies what `trainer`'s pieces still need from the request being handled; a piece borrowing
  // `owned` (the request's push decoded from a wire format) takes that buffer instead, leaving
  // the piece's old one in its place at its old size (its memory reused next time, and not
  // zeroed again when the next push has that size).
  void KeepBorrowed(const std::string& trainer, std::string* owned = nullptr);
  // Marks spent every present piece whose parts are all dense blocks `applied` says are done.
  void MarkSpent(const std::function<bool(const std::string& param, int64_t block)>& applied);

  // `trainer`'s push (an empty one if none).
  const Push& of(const std::string& trainer) const;
  // The samples of the pushes of `contributors`.
  int64_t Samples(std::span<const std::string> contributors) const;
  // The barrier of `contributors` is applied: their pushes no longer count.
  void Release(std::span<const std::string> contributors);
  // Every piece held is forgotten (the buffers stay).
  void Clear();
  // Pushes that count now.
  int held() const { return held_; }

 private:
  static void Reset(Push& p);
  std::map<std::string, Push> pushes_;
  int held_ = 0;  // entries with `held` set
};

}  // namespace tessera
