// A control group's CPU quota, in cores: see cpu_quota.h.
#include "common/cpu_quota.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace tessera {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

std::optional<int64_t> Integer(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
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
    path.resize(path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  }
  return out;
}

}  // namespace

CgroupPaths ParseProcCgroup(std::string_view text) {
  CgroupPaths out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string path(Trim(line.substr(b + 1)));
    if (id == "0" && controllers.empty()) {
      out.unified = path;
      continue;
    }
    for (std::string_view rest = controllers; !rest.empty();) {
      const size_t comma = rest.find(',');
      if (rest.substr(0, comma) == "cpu") out.cpu_v1 = path;
      rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
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
