// Pushes in pieces (see step_pieces.h).
#include "pserver/step_pieces.h"

namespace tessera {

Status StepPieces::CheckNumbering(const std::string& trainer, int piece, bool last, const std::set<int>& seen,
                                  int last_index) {
  auto who = [&] { return "trainer " + trainer + "'s piece " + std::to_string(piece); };
  if (piece < 0 || piece >= kMaxPieces) {
    return Status::InvalidArgument(who() + ": a piece index must be in [0, " + std::to_string(kMaxPieces) +
                                   ")");
  }
  if (last_index >= 0 && (last || piece > last_index)) {
    return Status::InvalidArgument(who() + " comes after its last piece " + std::to_string(last_index));
  }
  if (last && !seen.empty() && *seen.rbegin() > piece) {
    return Status::InvalidArgument(who() + " is marked last but piece " + std::to_string(*seen.rbegin()) +
                                   " came before it");
  }
  return Status::OK();
}

StatusOr<StepPieces::Arrival> StepPieces::Arrive(const std::string& trainer, int piece, bool last,
                                                 int64_t samples, const std::vector<Block>& blocks) {
  auto who = [&] { return "trainer " + trainer + "'s piece " + std::to_string(piece); };
  auto found = trainers_.find(trainer);
  const Trainer* known = found != trainers_.end() ? &found->second : nullptr;
  if (known && known->pieces.count(piece)) return Arrival::kDuplicate;
  static const std::set<int> kNone;
  TESSERA_RETURN_IF_ERROR(
      CheckNumbering(trainer, piece, last, known ? known->pieces : kNone, known ? known->last : -1));
  if (known) {
    if (known->samples != samples) {
      return Status::InvalidArgument(who() + " sums " + std::to_string(samples) +
                                     " samples, its earlier pieces " + std::to_string(known->samples));
    }
    for (const Block& b : blocks) {
      if (known->blocks.count(b)) {
        return Status::InvalidArgument(who() + " holds block " + std::to_string(b.block) + " of '" + b.param +
                                       "', sent in piece " + std::to_string(known->blocks.at(b)) +
                                       " already");
      }
    }
  }
  std::set<Block> seen;
  for (const Block& b : blocks) {
    if (!seen.insert(b).second) {
      return Status::InvalidArgument(who() + " holds block " + std::to_string(b.block) + " of '" + b.param +
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
