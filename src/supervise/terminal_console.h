// TerminalConsole: what `tessera local` writes to stderr: event lines ("pserver-1 exited,
// restarting in 1s") and one progress line, redrawn in place on a terminal and printed every
// five seconds otherwise, so events never tear the progress line. Used by the supervisor only;
// not thread-safe (one thread writes).
#pragma once

#include <cstdio>
#include <string>

#include "common/clock.h"

namespace tessera::supervise {

class TerminalConsole {
 public:
  explicit TerminalConsole(bool tty) : tty_(tty) {}
  void Event(const std::string& line) {
    if (tty_ && drawn_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", line.c_str());
    if (tty_ && drawn_) std::fprintf(stderr, "%s", last_.c_str());
    std::fflush(stderr);
  }
  void Progress(const std::string& line) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      drawn_ = true;
      last_ = line;
    } else if (Now() - printed_ >= std::chrono::seconds(5)) {
      std::fprintf(stderr, "%s\n", line.c_str());
      printed_ = Now();
    }
    std::fflush(stderr);
  }
  void EndProgress() {
    if (tty_ && drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

 private:
  bool tty_;
  bool drawn_ = false;
  std::string last_;
  TimePoint printed_{};
};

}  // namespace tessera::supervise
