// A control group's CPU quota, in cores: see cpu_quota.h.
#include "common/cpu_quota.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/strings.h"

namespace tessera {
namespace {

std::optional<int64_t> Integer(std::string_view s) {
  auto v = ParseInt64(Trim(s), "");
  return v.ok() ? std::optional<int64_t>(*v) : std::nullopt;
}

std::optional<double> Cores(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<double>(quota) / static_cast<double>(period);
}

// "/a/b" -> {"/a/b", "/a", ""}: the group and its parents up to the mount's root ("" joins as
// the mount point itself). At most 64 levels.
std::vector<std::string> SelfAndParents(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (int i = 0; i < 64; ++i) {
    out.push_back(path);
    if (path.empty()) break;
    const size_t slash = path.rfind('/');
    path.resize(slash == std::string::npos ? 0 : slash);
  }
  return out;
}

}  // namespace

CgroupPaths ParseProcCgroup(std::string_view text) {
  CgroupPaths out;
  for (const std::string& line : Split(text, '\n')) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string_view id = std::string_view(line).substr(0, a);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path(Trim(std::string_view(line).substr(b + 1)));
    if (id == "0" && controllers.empty()) {
      out.unified = path;
      continue;
    }
    for (const std::string& c : Split(controllers, ',')) {
      if (c == "cpu") out.cpu_v1 = path;
    }
  }
  return out;
}

std::optional<double> QuotaFromCpuMax(std::string_view cpu_max) {
  cpu_max = Trim(cpu_max);
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;  // "max" alone, or not cpu.max
  auto quota = Integer(cpu_max.substr(0, space));
  auto period = Integer(cpu_max.substr(space + 1));
  if (!quota || !period) return std::nullopt;  // "max 100000": no quota
  return Cores(*quota, *period);
}

std::optional<double> QuotaFromCfs(std::string_view quota_us, std::string_view period_us) {
  auto quota = Integer(quota_us);
  auto period = Integer(period_us);
  if (!quota || !period) return std::nullopt;
  return Cores(*quota, *period);  // -1: no quota
}

std::optional<double> CgroupCpuQuota(std::string_view proc_cgroup, const ReadTextFile& read) {
  const CgroupPaths paths = ParseProcCgroup(proc_cgroup);
  std::optional<double> smallest;
  auto take = [&](std::optional<double> q) {
    if (q && (!smallest || *q < *smallest)) smallest = q;
  };
  if (!paths.unified.empty()) {  // a group path starts with '/': empty means no v2 line
    for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      for (const auto& group : SelfAndParents(paths.unified)) {
        if (auto text = read(std::string(mount) + group + "/cpu.max")) take(QuotaFromCpuMax(*text));
      }
    }
  }
  if (!paths.cpu_v1.empty()) {
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      for (const auto& group : SelfAndParents(paths.cpu_v1)) {
        const std::string dir = std::string(mount) + group;
        auto quota = read(dir + "/cpu.cfs_quota_us");
        auto period = quota ? read(dir + "/cpu.cfs_period_us") : std::nullopt;
        if (quota && period) take(QuotaFromCfs(*quota, *period));
      }
    }
  }
  return smallest;
}

int UsableCores(int cpus, std::optional<double> quota) {
  if (cpus <= 0 || !quota) return std::max(cpus, 0);
  return std::clamp(static_cast<int>(std::floor(*quota + 1e-9)), 1, cpus);
}

}  // namespace tessera
