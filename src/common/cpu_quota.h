// The cores a process may really use: the CPUs it may run on, cut down to its control group's
// CPU quota. A container with a CPU limit (Kubernetes `resources.limits.cpu`, `docker run
// --cpus`) sees every core of the machine in nproc, but the kernel stops all its threads once
// they have used the quota in a period (100 ms by default) and lets them go on only at the next:
// a launcher that counted the machine's cores would turn on busy polling there, whose spinning
// uses the quota up and stalls the whole job for the rest of each period (bench/README.md, "CPU
// quotas"). The quota is read from cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us` and
// `cpu.cfs_period_us`) along the process's group and its parents, the smallest one winning.
// Pure, with the files read through a function the caller gives (HostCores in math_threads.h
// gives the real ones).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// The groups of /proc/self/cgroup's text: the unified (v2) one, and the v1 one holding the cpu
// controller; empty when absent.
struct CgroupPaths {
  std::string unified;  // "0::/a/b" -> "/a/b"
  std::string cpu_v1;   // "4:cpu,cpuacct:/a/b" -> "/a/b"
};
CgroupPaths ParseProcCgroup(std::string_view text);

// Cores a quota allows: cgroup v2's cpu.max ("max 100000": none; "150000 100000": 1.5), or v1's
// quota and period (a quota of -1: none). Nothing for no quota or text that is not one.
std::optional<double> QuotaFromCpuMax(std::string_view cpu_max);
std::optional<double> QuotaFromCfs(std::string_view quota_us, std::string_view period_us);

// Reads a file's text; nothing when it cannot be read.
using ReadTextFile = std::function<std::optional<std::string>(const std::string& path)>;

// The smallest quota along the groups of `proc_cgroup` (/proc/self/cgroup's text) and their
// parents, under the usual mount points: /sys/fs/cgroup (v2, or v2 at /sys/fs/cgroup/unified
// beside v1) and /sys/fs/cgroup/cpu or /sys/fs/cgroup/cpu,cpuacct (v1). Nothing when none of
// them sets one.
std::optional<double> CgroupCpuQuota(std::string_view proc_cgroup, const ReadTextFile& read);

// The cores to plan with: `cpus` (the CPUs this process may run on), cut to the quota's whole
// cores, at least 1 when there is a quota; 0 (unknown) stays 0.
int UsableCores(int cpus, std::optional<double> quota);

}  // namespace tessera
