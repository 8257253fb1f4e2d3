// Threads for a trainer's math libraries: see math_threads.h.
#include "common/math_threads.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "common/cpu_quota.h"
#include "common/files.h"

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

int HostCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0
                       ? CPU_COUNT(&set)
                       : static_cast<int>(std::thread::hardware_concurrency());
  auto read = [](const std::string& path) -> std::optional<std::string> {
    auto text = ReadFile(path);
    return text.ok() ? std::optional<std::string>(std::move(*text)) : std::nullopt;
  };
  return UsableCores(cpus, CgroupCpuQuota(read("/proc/self/cgroup").value_or(""), read));
}

}  // namespace tessera
