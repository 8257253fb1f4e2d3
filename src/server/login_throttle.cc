// LoginThrottle (see login_throttle.h).
#include "server/login_throttle.h"

#include <algorithm>

namespace tessera::server {

int64_t LoginThrottle::Delay(int failures) const {
  const int over = failures - o_.free_failures;
  if (over < 0) return 0;
  int64_t d = o_.first_delay_ms;
  for (int i = 0; i < over && d < o_.max_delay_ms; ++i) d *= 2;
  return std::min(d, o_.max_delay_ms);
}

int64_t LoginThrottle::WaitMs(const std::vector<std::string>& keys, int64_t now_ms) const {
  int64_t wait = 0;
  for (const auto& k : keys) {
    auto it = keys_.find(k);
    if (it == keys_.end() || now_ms - it->second.last_ms > o_.forget_after_ms) continue;
    wait = std::max(wait, it->second.allowed_ms - now_ms);
  }
  return wait;
}

void LoginThrottle::Failed(const std::vector<std::string>& keys, int64_t now_ms) {
  for (const auto& k : keys) {
    Entry& e = keys_[k];
    if (now_ms - e.last_ms > o_.forget_after_ms) e = Entry{};
    ++e.failures;
    e.last_ms = now_ms;
    e.allowed_ms = now_ms + Delay(e.failures);
  }
  // Bounded: the forgotten first, then the stalest.
  if (keys_.size() <= o_.max_keys) return;
  for (auto it = keys_.begin(); it != keys_.end();)
    it = now_ms - it->second.last_ms > o_.forget_after_ms ? keys_.erase(it) : std::next(it);
  while (keys_.size() > o_.max_keys) {
    auto stalest = std::min_element(keys_.begin(), keys_.end(), [](const auto& a, const auto& b) {
      return a.second.last_ms < b.second.last_ms;
    });
    keys_.erase(stalest);
  }
}

void LoginThrottle::Succeeded(const std::vector<std::string>& keys) {
  for (const auto& k : keys) keys_.erase(k);
}

int LoginThrottle::Failures(const std::string& key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.failures;
}

}  // namespace tessera::server
