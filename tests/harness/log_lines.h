// Reading Tessera's log lines in tests and benches ("2026-11-26 15:30:45.438 I [job=... node=...]
// message"). Test-only.
#pragma once

#include <cstdio>
#include <string>

namespace tessera::testing {

// Seconds since midnight of a log line's "YYYY-MM-DD HH:MM:SS.mmm" stamp; -1 if it has none.
inline double LogLineSeconds(const std::string& line) {
  int h = 0, m = 0, s = 0, ms = 0;
  if (line.size() < 23 || std::sscanf(line.c_str() + 11, "%d:%d:%d.%d", &h, &m, &s, &ms) != 4) return -1;
  return h * 3600 + m * 60 + s + ms / 1000.0;
}

}  // namespace tessera::testing
