// CPU quotas: /proc/self/cgroup and the quota files parsed, the smallest quota along a group's
// parents found under v1 and v2 mounts, the cores cut to it; and HostCores in a real control group
// with a quota (when this machine lets the test make one).
#include "common/cpu_quota.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/math_threads.h"

namespace tessera {
namespace {

TEST(CpuQuotaTest, ProcCgroupNamesTheUnifiedAndTheCpuGroup) {
  auto v2 = ParseProcCgroup("0::/user.slice/job.scope\n");
  EXPECT_EQ(v2.unified, "/user.slice/job.scope");
  EXPECT_EQ(v2.cpu_v1, "");
  auto v1 = ParseProcCgroup(
      "12:pids:/docker/abc\n4:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n1:name=systemd:/docker/abc\n"
      "0::/docker/abc\n");
  EXPECT_EQ(v1.cpu_v1, "/docker/abc");
  EXPECT_EQ(v1.unified, "/docker/abc");
  EXPECT_EQ(ParseProcCgroup("5:cpuacct:/x\n").cpu_v1, "") << "cpuacct is not cpu";
  EXPECT_EQ(ParseProcCgroup("2:cpu:/\n").cpu_v1, "/");
  auto junk = ParseProcCgroup("garbage\n\n:\n");
  EXPECT_EQ(junk.unified, "");
  EXPECT_EQ(junk.cpu_v1, "");
}

TEST(CpuQuotaTest, QuotaFilesGiveCores) {
  EXPECT_EQ(QuotaFromCpuMax("max 100000\n"), std::nullopt);
  EXPECT_DOUBLE_EQ(*QuotaFromCpuMax("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(*QuotaFromCpuMax("50000 100000"), 0.5);
  EXPECT_EQ(QuotaFromCpuMax(""), std::nullopt);
  EXPECT_EQ(QuotaFromCpuMax("max"), std::nullopt);
  EXPECT_EQ(QuotaFromCpuMax("12x 100000"), std::nullopt);
  EXPECT_EQ(QuotaFromCpuMax("100000 0"), std::nullopt);
  EXPECT_EQ(QuotaFromCfs("-1\n", "100000\n"), std::nullopt);
  EXPECT_DOUBLE_EQ(*QuotaFromCfs("200000\n", "100000\n"), 2.0);
  EXPECT_EQ(QuotaFromCfs("", "100000"), std::nullopt);
}

TEST(CpuQuotaTest, TheSmallestQuotaAlongTheGroupAndItsParentsWins) {
  std::map<std::string, std::string> files;
  auto read = [&](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(CgroupCpuQuota("0::/a/b\n", read), std::nullopt) << "no files: no quota";
  files["/sys/fs/cgroup/a/b/cpu.max"] = "max 100000\n";
  files["/sys/fs/cgroup/a/cpu.max"] = "300000 100000\n";
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota("0::/a/b\n", read), 3.0) << "a parent's limit holds its children";
  files["/sys/fs/cgroup/a/b/cpu.max"] = "150000 100000\n";
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota("0::/a/b\n", read), 1.5);
  // Inside a container's cgroup namespace the group is "/" and the limit is the mount's own.
  files["/sys/fs/cgroup/cpu.max"] = "100000 100000\n";
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota("0::/\n", read), 1.0);

  // v1: the cpu hierarchy, mounted as cpu or as cpu,cpuacct; v2 lines then point elsewhere.
  files.clear();
  files["/sys/fs/cgroup/cpu,cpuacct/kube/pod/cpu.cfs_quota_us"] = "50000\n";
  files["/sys/fs/cgroup/cpu,cpuacct/kube/pod/cpu.cfs_period_us"] = "100000\n";
  files["/sys/fs/cgroup/cpu,cpuacct/kube/cpu.cfs_quota_us"] = "-1\n";
  files["/sys/fs/cgroup/cpu,cpuacct/kube/cpu.cfs_period_us"] = "100000\n";
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota("4:cpu,cpuacct:/kube/pod\n0::/\n", read), 0.5);
  files["/sys/fs/cgroup/cpu/tq/cpu.cfs_quota_us"] = "200000\n";  // no period: not a quota
  EXPECT_EQ(CgroupCpuQuota("4:cpu:/tq\n", read), std::nullopt);
  files["/sys/fs/cgroup/cpu/tq/cpu.cfs_period_us"] = "100000\n";
  EXPECT_DOUBLE_EQ(*CgroupCpuQuota("4:cpu:/tq\n", read), 2.0);
  EXPECT_EQ(CgroupCpuQuota("", read), std::nullopt) << "no /proc/self/cgroup";
}

TEST(CpuQuotaTest, CoresAreCutToTheQuotasWholeCores) {
  EXPECT_EQ(UsableCores(8, std::nullopt), 8);
  EXPECT_EQ(UsableCores(8, 2.0), 2);
  EXPECT_EQ(UsableCores(8, 1.5), 1);
  EXPECT_EQ(UsableCores(8, 0.25), 1) << "a fraction of a core is still one to plan with";
  EXPECT_EQ(UsableCores(2, 16.0), 2) << "a quota above the CPUs leaves the CPUs";
  EXPECT_EQ(UsableCores(0, 1.0), 0) << "unknown stays unknown";
}

// A real control group with a one-core quota (cgroup v1's cpu hierarchy or v2, whichever this
// machine has writable): a child moved into it sees one core in HostCores.
TEST(CpuQuotaTest, HostCoresInAGroupWithAQuota) {
  namespace fs = std::filesystem;
  const int outside = HostCores();
  ASSERT_GE(outside, 1);
  std::string dir, procs;
  std::vector<std::pair<std::string, std::string>> writes;
  const std::string name = "tessera-quota-test-" + std::to_string(::getpid());
  if (fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")) {
    dir = "/sys/fs/cgroup/cpu/" + name;
    writes = {{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "100000"}};
    procs = "tasks";
  } else if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    dir = "/sys/fs/cgroup/" + name;
    writes = {{"cpu.max", "100000 100000"}};
    procs = "cgroup.procs";
  }
  std::error_code ec;
  if (dir.empty() || !fs::create_directory(dir, ec)) GTEST_SKIP() << "no writable cpu control group here";
  bool set = true;
  for (const auto& [file, value] : writes)
    set = set && static_cast<bool>(std::ofstream(dir + "/" + file) << value);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = set ? ::fork() : -1;
  if (child == 0) {
    ::close(fds[0]);
    std::ofstream(dir + "/" + procs) << ::getpid() << std::flush;
    const int cores = HostCores();
    (void)!::write(fds[1], &cores, sizeof cores);
    ::_exit(0);
  }
  ::close(fds[1]);
  int cores = -1;
  const bool got = child > 0 && ::read(fds[0], &cores, sizeof cores) == sizeof cores;
  ::close(fds[0]);
  if (child > 0) ::waitpid(child, nullptr, 0);
  fs::remove(dir, ec);  // empty once the child is gone
  if (!set) GTEST_SKIP() << "could not set a quota on " << dir;
  ASSERT_TRUE(got);
  EXPECT_EQ(cores, 1) << "a one-core quota, " << outside << " cores outside it";
}

}  // namespace
}  // namespace tessera
