// LogNotices (see log_notices.h).
#include "local/log_notices.h"

#include "common/logging.h"

namespace tessera::local {

std::vector<std::string> LogNotices::Feed(std::string_view piece, TimePoint now) {
  std::vector<std::string> out;
  const std::string_view mark = kNoticeMark;
  while (!piece.empty()) {
    const size_t nl = piece.find('\n');
    const std::string_view part = piece.substr(0, nl);
    if (!skipping_) {
      if (partial_.size() + part.size() > kMaxLine) {
        partial_.clear();
        skipping_ = true;
      } else {
        partial_.append(part);
      }
    }
    if (nl == std::string_view::npos) break;
    piece.remove_prefix(nl + 1);
    if (!skipping_) {
      if (const size_t at = partial_.find(mark); at != std::string::npos) {
        std::string text = partial_.substr(at + mark.size());
        // The same notice with other numbers in it (a version, a step) counts as a repeat.
        std::string key;
        for (char c : text)
          if (!(c >= '0' && c <= '9') || key.empty() || key.back() != '#')
            key += (c >= '0' && c <= '9') ? '#' : c;
        if (shown_.size() > 1000) shown_.clear();
        auto [it, fresh] = shown_.emplace(key, now);
        if (fresh || now - it->second >= kRepeatAfter) {
          it->second = now;
          out.push_back(std::move(text));
        }
      }
    }
    partial_.clear();
    skipping_ = false;
  }
  return out;
}

}  // namespace tessera::local
