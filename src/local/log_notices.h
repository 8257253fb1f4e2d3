// LogNotices: the lines of a child's log meant for the terminal (those whose message starts with
// kNoticeMark, common/logging.h), found as the log grows. The supervisor feeds it each new piece
// of a log; it keeps an unfinished last line for the next piece (at most 16 KiB of it: a longer
// line is skipped whole) and repeats no notice within a minute of showing the same one. Pure: no
// files, no clock (the caller passes the time).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace tessera::local {

class LogNotices {
 public:
  // The notices completed by `piece` (the text after the mark), each shown at most once a minute.
  std::vector<std::string> Feed(std::string_view piece, TimePoint now);

  static constexpr size_t kMaxLine = 16 << 10;
  static constexpr std::chrono::seconds kRepeatAfter{60};

 private:
  std::string partial_;
  bool skipping_ = false;  // inside a line longer than kMaxLine
  std::map<std::string, TimePoint> shown_;
};

}  // namespace tessera::local
