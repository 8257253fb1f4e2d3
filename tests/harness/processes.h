// What runs on this machine, for tests that must leave nothing behind: every process (in any
// network namespace: they share the PID namespace) whose command line holds a string, such as
// a job name unique to the test. Test-only.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/files.h"

namespace tessera::testing {

// "pid: command line" of each process (but this one) whose command line holds `needle`.
inline std::vector<std::string> ProcessesWith(const std::string& needle) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(::getpid())) continue;
    auto cmd = ReadFile(e.path().string() + "/cmdline");
    if (!cmd.ok()) continue;
    std::string line = *cmd;
    for (char& c : line) c = c == '\0' ? ' ' : c;
    if (line.find(needle) != std::string::npos) found.push_back(pid + ": " + line);
  }
  return found;
}

// The same, one per line, for a failure message.
inline std::string ProcessesText(const std::string& needle) {
  std::string text;
  for (const auto& p : ProcessesWith(needle)) text += p + "\n";
  return text;
}

}  // namespace tessera::testing
