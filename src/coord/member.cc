// Member order and MemberEpochs (see member.h).
#include "coord/member.h"

#include <algorithm>

namespace tessera {
namespace {

// A name of 1-18 digits as a number (no sign: member names never have one).
bool AsNumber(const std::string& s, int64_t* v) {
  if (s.empty() || s.size() > 18) return false;
  int64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + (c - '0');
  }
  *v = x;
  return true;
}

}  // namespace

bool MemberNameLess(const std::string& a, const std::string& b) {
  int64_t na = 0, nb = 0;
  const bool a_number = AsNumber(a, &na), b_number = AsNumber(b, &nb);
  if (a_number && b_number) return na < nb || (na == nb && a < b);  // "07" before "7"
  if (a_number != b_number) return a_number;
  return a < b;
}

const Member* MemberList::Find(const std::string& name) const {
  auto it = std::lower_bound(members.begin(), members.end(), name,
                             [](const Member& m, const std::string& n) { return MemberNameLess(m.name, n); });
  return it != members.end() && it->name == name ? &*it : nullptr;
}

int64_t MemberEpochs::EpochOf(const std::string& name) const {
  auto it = epochs_.find(name);
  return it == epochs_.end() ? 0 : it->second;
}

std::vector<MemberEpochs::Left> MemberEpochs::Apply(const MemberChanges& c) {
  std::vector<Left> left;
  if (c.relisted) {
    std::unordered_map<std::string, int64_t> now;
    now.reserve(c.changes.size());
    for (const auto& ch : c.changes) {
      if (!ch.removed) now[ch.member.name] = ch.member.epoch;
    }
    for (const auto& [name, epoch] : epochs_) {
      auto it = now.find(name);
      if (it == now.end() || it->second != epoch) left.push_back({name, epoch});
    }
    std::sort(left.begin(), left.end(),
              [](const Left& a, const Left& b) { return MemberNameLess(a.name, b.name); });
    epochs_ = std::move(now);
    return left;
  }
  for (const auto& ch : c.changes) {
    auto it = epochs_.find(ch.member.name);
    if (ch.removed) {
      if (it == epochs_.end()) continue;
      left.push_back({it->first, it->second});
      epochs_.erase(it);
    } else if (it == epochs_.end()) {
      epochs_.emplace(ch.member.name, ch.member.epoch);
    } else if (it->second != ch.member.epoch) {
      left.push_back({it->first, it->second});
      it->second = ch.member.epoch;
    }
  }
  return left;
}

}  // namespace tessera
