// Threads for a trainer's math libraries: see math_threads.h.
#include "common/math_threads.h"

#include <algorithm>
#include <thread>

namespace tessera {

std::vector<std::pair<std::string, std::string>> MathThreadEnv(
    int cores, int processes, const std::function<const char*(const char*)>& getenv) {
  if (processes <= 0) return {};
  for (const char* var : kMathThreadVars) {
    if (getenv(var) != nullptr) return {};
  }
  const std::string threads = std::to_string(std::max(1, cores / processes));
  std::vector<std::pair<std::string, std::string>> env;
  for (const char* var : kMathThreadVars) env.emplace_back(var, threads);
  return env;
}

int HostCores() { return static_cast<int>(std::thread::hardware_concurrency()); }

}  // namespace tessera
