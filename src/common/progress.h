// ProgressBar: progress of long work (uploads, downloads) on stderr. On a terminal it redraws
// one line in place at most 10 times a second; otherwise it prints nothing until Finish(),
// which prints one summary line either way. Not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace tessera {

class ProgressBar {
 public:
  // `total` in the unit of Update()'s first argument (0: unknown).
  ProgressBar(std::string label, int64_t total, std::string unit);
  // `done` so far, and an optional second figure shown after it (e.g. records).
  void Update(int64_t done, const std::string& extra = "");
  void Finish(const std::string& summary);
  static bool StderrIsTerminal();

 private:
  std::string label_;
  int64_t total_;
  std::string unit_;
  bool tty_;
  TimePoint start_, last_;
  bool drawn_ = false;
};

}  // namespace tessera
