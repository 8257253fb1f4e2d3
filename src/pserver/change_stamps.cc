// ChangeStamps (see change_stamps.h).
#include "pserver/change_stamps.h"

namespace tessera {

void ChangeStamps::Reset(uint32_t new_id) {
  id_ = new_id;
  stamps_.clear();
  base_ = ++stamp_;
}

void ChangeStamps::Applied(const std::string& param, int64_t block, const float* grad, size_t n) {
  Block& b = stamps_[{param, block}];
  std::vector<uint32_t>& s = b.stamps;
  if (s.size() != n) s.assign(n, 0);
  size_t changed = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool touched = grad[i] != 0.0f;
    s[i] = touched ? stamp_ : s[i];
    changed += touched;
  }
  if (changed == n) b.every = stamp_;
}

bool ChangeStamps::ChangedSince(const std::string& param, int64_t block, uint64_t since,
                                std::vector<uint32_t>* out, size_t most) const {
  out->clear();
  const auto since_id = static_cast<uint32_t>(since >> 32);
  const auto since_stamp = static_cast<uint32_t>(since);
  if (since_id != id_ || since_stamp < base_ || since_stamp > stamp_) return false;
  auto it = stamps_.find({param, block});
  if (it == stamps_.end()) return true;  // not touched since the tracking began
  const std::vector<uint32_t>& s = it->second.stamps;
  if (it->second.every > since_stamp) {
    // Every element changed since (sign pushes do that at each step): no scan.
    if (s.size() > most) return false;
    out->resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) (*out)[i] = static_cast<uint32_t>(i);
    return true;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] > since_stamp) {
      if (out->size() == most) {
        out->clear();
        return false;
      }
      out->push_back(static_cast<uint32_t>(i));
    }
  }
  return true;
}

}  // namespace tessera
