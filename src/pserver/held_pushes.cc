// HeldPushes: see held_pushes.h.
#include "pserver/held_pushes.h"

#include <algorithm>

namespace tessera {

void HeldPushes::Reset(Push& p) {
  for (int i = 0; i < p.used; ++i) {
    p.pieces[i].present = p.pieces[i].spent = false;
    p.pieces[i].borrowed = nullptr;
  }
  p.used = 0;
}

bool HeldPushes::Hold(const std::string& trainer, int index, int64_t samples,
                      google::protobuf::RepeatedPtrField<wire::Segment>* segments, SegmentList list,
                      ConstBuffer payload, bool counted) {
  const bool opened = held_ == 0 && counted;
  Push& p = pushes_[trainer];
  if (!p.held && counted) ++held_;
  p.held = counted;
  p.samples = samples;
  if (static_cast<int>(p.pieces.size()) <= index) {
    p.pieces.resize(index + 1);  // moves the pieces: their lists point to their own segments again
    for (auto& h : p.pieces) h.list.Rebind(&h.segments);
  }
  p.used = std::max(p.used, index + 1);
  Piece& h = p.pieces[index];
  h.present = true;
  h.spent = false;
  h.segments.Swap(segments);
  h.list = std::move(list);
  h.list.Rebind(&h.segments);
  // `payload` keeps its old bytes (data() reads the borrowed ones): KeepBorrowed may hand it back
  // to the decoder of the next push, whose resize to the same size then writes nothing (a clear
  // made it zero tens of MB each step).
  h.borrowed = static_cast<const char*>(payload.data);
  h.borrowed_size = payload.size;
  return opened;
}

bool HeldPushes::HoldEmpty(const std::string& trainer) {
  Push& p = pushes_[trainer];
  bool opened = false;
  if (!p.held) opened = ++held_ == 1;
  Reset(p);
  p.held = true;
  p.samples = 0;
  return opened;
}

void HeldPushes::Drop(const std::string& trainer) {
  if (auto it = pushes_.find(trainer); it != pushes_.end()) Reset(it->second);
}

void HeldPushes::KeepBorrowed(const std::string& trainer, std::string* owned) {
  auto it = pushes_.find(trainer);
  if (it == pushes_.end()) return;
  for (int i = 0; i < it->second.used; ++i) {
    Piece& h = it->second.pieces[i];
    if (h.borrowed && h.present && !h.spent) {
      if (owned && h.borrowed == owned->data() && h.borrowed_size == owned->size()) {
        h.payload.swap(*owned);
      } else {
        h.payload.assign(h.borrowed, h.borrowed_size);
      }
    }
    h.borrowed = nullptr;
  }
}

void HeldPushes::MarkSpent(const std::function<bool(const std::string& param, int64_t block)>& applied) {
  for (auto& [trainer, p] : pushes_) {
    for (int i = 0; i < p.used; ++i) {
      Piece& h = p.pieces[i];
      if (!h.present || h.spent) continue;
      bool spent = true;
      for (const auto& part : h.list.parts()) {
        spent = spent && part.dense && applied(h.list.segment(part).param(), h.list.segment(part).block());
      }
      h.spent = spent;
    }
  }
}

const HeldPushes::Push& HeldPushes::of(const std::string& trainer) const {
  static const Push kNone;
  auto it = pushes_.find(trainer);
  return it == pushes_.end() ? kNone : it->second;
}

int64_t HeldPushes::Samples(std::span<const std::string> contributors) const {
  int64_t total = 0;
  for (const auto& c : contributors) total += of(c).samples;
  return total;
}

void HeldPushes::Release(std::span<const std::string> contributors) {
  for (const auto& c : contributors) {
    auto it = pushes_.find(c);
    if (it == pushes_.end()) continue;
    if (it->second.held) --held_;
    it->second.held = false;
  }
}

void HeldPushes::Clear() {
  for (auto& [trainer, p] : pushes_) Reset(p);
}

}  // namespace tessera
