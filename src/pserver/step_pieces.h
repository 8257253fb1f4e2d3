// StepPieces: a sync step's pushes that come in pieces, and which dense blocks may be applied
// before the step's barrier. A trainer sends its push as pieces 0, 1, ..., the last one marked,
// as backward produces its gradients; the push is complete (it counts for the barrier) once every
// piece up to the last arrived. A dense block is ready when every contributor of the step (as the
// consistency rule names them) sent it or completed its push without it, and at least one sent
// it: summing the senders' gradients in trainer-id order then gives the block the barrier would
// have given it, bit for bit. Pure: no I/O, threads or clocks; the pserver's lock guards it.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/status.h"

namespace tessera {

class StepPieces {
 public:
  struct Block {
    std::string param;
    int64_t block = 0;
    auto operator<=>(const Block&) const = default;
  };
  // A piece index is below this: a push in more pieces is refused.
  static constexpr int kMaxPieces = 4096;

  enum class Arrival {
    kStored,     // kept; more pieces of the push are to come
    kComplete,   // the push's last missing piece: it now counts
    kDuplicate,  // a piece that already arrived (a retry): ignore it
  };
  // Piece `piece` of `trainer`'s push for the open step, holding the dense `blocks`; `last`: no
  // pieces follow it; `samples`: the push's sample count (the same in every piece).
  // InvalidArgument, with nothing kept, for a piece out of range or after the last, a second last
  // piece, a sample count that differs from the trainer's earlier pieces, or a block the
  // trainer already sent.
  StatusOr<Arrival> Arrive(const std::string& trainer, int piece, bool last, int64_t samples,
                           const std::vector<Block>& blocks);

  // The numbering rules of a push in pieces (sync here, async in Consistency::AsyncPiece):
  // InvalidArgument, naming `trainer`'s piece, for an index outside [0, kMaxPieces), a piece
  // after the push's last (`last_index`; -1 while it has not arrived), a second last piece, or a
  // last piece below one already `seen`. A piece already seen (a duplicate) is the caller's to
  // answer first.
  static Status CheckNumbering(const std::string& trainer, int piece, bool last, const std::set<int>& seen,
                               int last_index);

  // A block ready to apply, and who sent it: (trainer, piece) in the contributors' order.
  struct Ready {
    Block block;
    std::vector<std::pair<std::string, int>> senders;
  };
  // The blocks that became ready for `contributors` (in trainer-id order); each is marked
  // applied and returned once. None while a contributor has sent nothing yet.
  std::vector<Ready> TakeReady(const std::vector<std::string>& contributors);

  // The samples of `trainer`'s pieces (-1: none arrived).
  int64_t samples(const std::string& trainer) const;
  bool complete(const std::string& trainer) const;
  bool applied(const Block& b) const { return applied_.count(b) > 0; }
  bool any_applied() const { return !applied_.empty(); }
  bool empty() const { return trainers_.empty(); }
  // Forgets `trainer`'s pieces (its push was refused or dropped); blocks applied stay applied.
  void Drop(const std::string& trainer);
  // The step closed: forgets everything.
  void Clear();

 private:
  struct Trainer {
    int64_t samples = 0;
    int last = -1;  // the last piece's index, once it arrived
    std::set<int> pieces;
    std::map<Block, int> blocks;  // block -> the piece that holds it
  };
  std::map<std::string, Trainer> trainers_;
  std::set<Block> pending_;  // sent by someone, not applied
  std::set<Block> applied_;
};

}  // namespace tessera
