// Whether a process lives, its memory, and pids a test's child processes wrote down. Test-only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "common/strings.h"
#include "harness/wait.h"

namespace tessera::testing {

// Present in /proc and not a zombie (an exited child whose parent has not reaped it yet).
inline bool ProcessAlive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// A process's resident memory in KiB (VmRSS), or -1.
inline int64_t RssKib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

// The numbers in a file, one per line (a file that does not exist has none).
inline std::vector<pid_t> PidsInFile(const std::string& path) {
  std::ifstream f(path);
  std::vector<pid_t> out;
  for (std::string line; std::getline(f, line);) {
    auto v = ParseInt64(Trim(line), "pid");
    if (v.ok()) out.push_back(static_cast<pid_t>(*v));
  }
  return out;
}

// Every pid gone within `timeout`; the ones still alive are listed in `*alive`.
inline bool AllGone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout, std::string* alive) {
  bool gone = WaitUntil(
      [&] {
        for (pid_t p : pids) {
          if (ProcessAlive(p)) return false;
        }
        return true;
      },
      timeout);
  alive->clear();
  for (pid_t p : pids) {
    if (ProcessAlive(p)) *alive += std::to_string(p) + " ";
  }
  return gone;
}

}  // namespace tessera::testing
