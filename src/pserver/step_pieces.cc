// Pushes in pieces (see step_pieces.h).
#include "pserver/step_pieces.h"

namespace tessera {

StatusOr<StepPieces::Arrival> StepPieces::Arrive(const std::string& trainer, int piece, bool last,
                                                 int64_t samples, const std::vector<Block>& blocks) {
  const std::string who = "trainer " + trainer + "'s piece " + std::to_string(piece);
  if (piece < 0 || piece >= kMaxPieces) {
    return Status::InvalidArgument(who + ": a piece index must be in [0, " + std::to_string(kMaxPieces) +
                                   ")");
  }
  auto found = trainers_.find(trainer);
  if (found != trainers_.end()) {
    const Trainer& t = found->second;
    if (t.pieces.count(piece)) return Arrival::kDuplicate;
    if (t.samples != samples) {
      return Status::InvalidArgument(who + " sums " + std::to_string(samples) +
                                     " samples, its earlier pieces " + std::to_string(t.samples));
    }
    if (t.last >= 0 && (last || piece > t.last)) {
      return Status::InvalidArgument(who + " comes after its last piece " + std::to_string(t.last));
    }
    if (last && !t.pieces.empty() && *t.pieces.rbegin() > piece) {
      return Status::InvalidArgument(who + " is marked last but piece " + std::to_string(*t.pieces.rbegin()) +
                                     " came before it");
    }
    for (const Block& b : blocks) {
      if (t.blocks.count(b)) {
        return Status::InvalidArgument(who + " holds block " + std::to_string(b.block) + " of '" + b.param +
                                       "', sent in piece " + std::to_string(t.blocks.at(b)) + " already");
      }
    }
  }
  std::set<Block> seen;
  for (const Block& b : blocks) {
    if (!seen.insert(b).second) {
      return Status::InvalidArgument(who + " holds block " + std::to_string(b.block) + " of '" + b.param +
                                     "' twice");
    }
  }
  Trainer& t = trainers_[trainer];
  t.samples = samples;
  t.pieces.insert(piece);
  if (last) t.last = piece;
  for (const Block& b : blocks) {
    t.blocks[b] = piece;
    if (!applied_.count(b)) pending_.insert(b);
  }
  return complete(trainer) ? Arrival::kComplete : Arrival::kStored;
}

bool StepPieces::complete(const std::string& trainer) const {
  auto it = trainers_.find(trainer);
  return it != trainers_.end() && it->second.last >= 0 &&
         static_cast<int>(it->second.pieces.size()) == it->second.last + 1;
}

int64_t StepPieces::samples(const std::string& trainer) const {
  auto it = trainers_.find(trainer);
  return it == trainers_.end() ? -1 : it->second.samples;
}

std::vector<StepPieces::Ready> StepPieces::TakeReady(const std::vector<std::string>& contributors) {
  std::vector<Ready> out;
  std::vector<const Trainer*> who;
  for (const auto& c : contributors) {
    auto it = trainers_.find(c);
    if (it == trainers_.end()) return out;  // someone has sent nothing yet
    who.push_back(&it->second);
  }
  if (who.empty()) return out;
  for (auto b = pending_.begin(); b != pending_.end();) {
    Ready r{*b, {}};
    bool ready = true;
    for (size_t i = 0; i < who.size() && ready; ++i) {
      auto held = who[i]->blocks.find(*b);
      if (held != who[i]->blocks.end()) {
        r.senders.emplace_back(contributors[i], held->second);
      } else {
        ready = who[i]->last >= 0 && static_cast<int>(who[i]->pieces.size()) == who[i]->last + 1;
      }
    }
    if (!ready || r.senders.empty()) {
      ++b;
      continue;
    }
    applied_.insert(*b);
    out.push_back(std::move(r));
    b = pending_.erase(b);
  }
  return out;
}

void StepPieces::Drop(const std::string& trainer) {
  auto it = trainers_.find(trainer);
  if (it == trainers_.end()) return;
  trainers_.erase(it);
  pending_.clear();
  for (const auto& [id, t] : trainers_) {
    for (const auto& [b, piece] : t.blocks) {
      if (!applied_.count(b)) pending_.insert(b);
    }
  }
}

void StepPieces::Clear() {
  trainers_.clear();
  pending_.clear();
  applied_.clear();
}

}  // namespace tessera
