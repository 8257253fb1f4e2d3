// PullQueue: see pull_queue.h.
#include "pserver/pull_queue.h"

#include <algorithm>

namespace tessera {

void PullQueue::Park(uint64_t ticket, bool piece, const wire::DataRequest& request, SegmentList pull,
                     std::unique_ptr<Responder> responder, std::unique_ptr<Prepared> prepared,
                     std::chrono::steady_clock::time_point since) {
  auto it = waiting_
                .emplace(ticket, Pending{piece, request, std::move(pull), std::move(responder), since,
                                         std::move(prepared)})
                .first;
  it->second.pull.Rebind(&it->second.request.pull());  // the copy's segments: they stay put in the map
}

std::unique_ptr<PullQueue::Prepared> PullQueue::Prepare(const SegmentList& pull, Responder& r) {
  const auto& parts = pull.parts();
  if (std::none_of(parts.begin(), parts.end(), [](const SegmentList::Part& p) { return p.dense; }))
    return nullptr;
  auto p = std::make_unique<Prepared>();
  p->payload = r.Allocate(pull.bytes());
  p->written.assign(parts.size(), 0);
  return p;
}

void PullQueue::WriteByNextApply(std::span<const uint64_t> tickets,
                                 const std::function<bool(const Pending&)>& writable) {
  for (uint64_t t : tickets) {
    auto it = waiting_.find(t);
    if (it == waiting_.end() || !writable(it->second)) continue;
    Pending& w = it->second;
    if (!w.prepared) w.prepared = Prepare(w.pull, *w.responder);
    if (w.prepared) next_.push_back({w.prepared.get(), &w.pull});
  }
}

void PullQueue::Attach(std::vector<ShardStore::DenseUpdate>& updates) {
  copy_to_.clear();
  told_.clear();
  copied_parts_.clear();
  if (next_.empty()) return;
  // Each list's dense blocks (its segments stay put while the apply runs), and its reply's progress.
  part_of_.resize(next_.size());
  rooms_.clear();
  for (size_t k = 0; k < next_.size(); ++k) {
    const MutableBuffer& payload = next_[k].first->payload;
    rooms_.push_back({static_cast<char*>(payload.data), payload.size, payload.progress});
    const SegmentList& list = *next_[k].second;
    part_of_[k].clear();
    for (size_t i = 0; i < list.parts().size(); ++i) {
      const SegmentList::Part& part = list.parts()[i];
      const wire::Segment& seg = list.segment(part);
      if (part.dense) part_of_[k].try_emplace({seg.param(), seg.block()}, static_cast<int>(i));
    }
  }
  // Room for every destination first: the updates point into copy_to_, which must not move.
  copy_to_.reserve(updates.size() * next_.size());
  told_.reserve(updates.size() * next_.size());
  for (auto& u : updates) {
    u.copy_to = copy_to_.data() + copy_to_.size();
    u.told = told_.data() + told_.size();
    for (size_t k = 0; k < next_.size(); ++k) {
      auto it = part_of_[k].find(std::pair<std::string_view, int64_t>(*u.param, u.block));
      if (it == part_of_[k].end()) continue;
      Prepared* prepared = next_[k].first;
      copy_to_.push_back(static_cast<float*>(prepared->payload.data) +
                         next_[k].second->parts()[it->second].offset);
      told_.push_back(rooms_[k].word ? &rooms_[k] : nullptr);
      copied_parts_.push_back({prepared, it->second});
    }
    u.copies = static_cast<int>(copy_to_.data() + copy_to_.size() - u.copy_to);
  }
}

void PullQueue::MarkWritten(uint64_t generation) {
  for (const auto& [prepared, part] : copied_parts_) prepared->written[part] = generation;
  copied_parts_.clear();
  copy_to_.clear();
  told_.clear();
  next_.clear();
}

}  // namespace tessera
