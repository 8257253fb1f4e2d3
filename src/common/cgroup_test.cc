// Cgroups: the layout of every kind of host parsed (v1, v2, both, a container's), the limits'
// writes for v1 and v2, the kernel's counters; and, where this process may make groups (root), real
// groups: membership that a daemon cannot leave, ending them all, limits the kernel enforces.
#include "common/cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <thread>

#include "common/files.h"
#include "common/process.h"
#include "harness/wait.h"

namespace tessera {
namespace {

ReadTextFile Files(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

// This project's CI machine: v1 controllers, each on its own mount, beside a v2 mount without any.
constexpr char kHybridMounts[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr char kHybridGroups[] =
    "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/process_api/92b7\n2:cpuacct:/\n1:cpu:/\n0::/\n";

TEST(CgroupLayoutTest, AHybridHostTracksOnV2AndLimitsOnV1) {
  CgroupLayout l = ParseCgroupLayout(kHybridMounts, kHybridGroups,
                                     Files({{"/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n"},
                                            {"/sys/fs/cgroup/unified/cgroup.subtree_control", "\n"}}));
  ASSERT_NE(l.Tracking(), nullptr);
  EXPECT_TRUE(l.Tracking()->v2);
  EXPECT_EQ(l.Tracking()->Dir(), "/sys/fs/cgroup/unified");
  ASSERT_NE(l.For("memory"), nullptr);
  EXPECT_FALSE(l.For("memory")->v2);
  EXPECT_EQ(l.For("memory")->Dir(), "/sys/fs/cgroup/memory/process_api/92b7");
  ASSERT_NE(l.For("pids"), nullptr);
  EXPECT_EQ(l.For("pids")->Dir(), "/sys/fs/cgroup/pids");
  ASSERT_NE(l.For("cpu"), nullptr);
  EXPECT_EQ(l.For("cpu")->Dir(), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(l.For("hugetlb"), nullptr) << "available on v2 but not handed on: not usable";
  EXPECT_EQ(l.For("io"), nullptr);
  EXPECT_NE(l.Describe().find("memory: v1 /sys/fs/cgroup/memory/process_api/92b7"), std::string::npos)
      << l.Describe();
}

TEST(CgroupLayoutTest, APureV2HostUsesV2ForWhatItsGroupHandsOn) {
  const char* mounts =
      "30 24 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";
  const char* groups = "0::/system.slice/tessera-server.service\n";
  const std::string dir = "/sys/fs/cgroup/system.slice/tessera-server.service";
  CgroupLayout l = ParseCgroupLayout(mounts, groups,
                                     Files({{dir + "/cgroup.controllers", "cpuset cpu io memory pids\n"},
                                            {dir + "/cgroup.subtree_control", "cpu memory pids\n"}}));
  ASSERT_NE(l.Tracking(), nullptr);
  EXPECT_EQ(l.Tracking()->Dir(), dir);
  for (const char* c : {"cpu", "memory", "pids"}) {
    ASSERT_NE(l.For(c), nullptr) << c;
    EXPECT_TRUE(l.For(c)->v2) << c;
    EXPECT_EQ(l.For(c)->Dir(), dir) << c;
  }
  EXPECT_EQ(l.For("io"), nullptr) << "available but not handed on";

  // The same host where the group could not hand them on (it holds processes itself).
  CgroupLayout kept = ParseCgroupLayout(
      mounts, groups,
      Files({{dir + "/cgroup.controllers", "cpu memory pids\n"}, {dir + "/cgroup.subtree_control", ""}}));
  EXPECT_NE(kept.Tracking(), nullptr) << "membership needs no controller";
  EXPECT_EQ(kept.For("memory"), nullptr);
}

TEST(CgroupLayoutTest, APureV1HostTracksOnPidsAndTakesJointMounts) {
  const char* mounts =
      "25 18 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "26 18 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "27 18 0:24 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
      "28 18 0:25 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n";
  const char* groups =
      "5:pids:/user.slice\n4:memory:/user.slice\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/x\n";
  CgroupLayout l = ParseCgroupLayout(mounts, groups, Files({}));
  ASSERT_NE(l.Tracking(), nullptr);
  EXPECT_FALSE(l.Tracking()->v2);
  EXPECT_EQ(l.Tracking()->Dir(), "/sys/fs/cgroup/pids/user.slice");
  ASSERT_NE(l.For("cpu"), nullptr);
  EXPECT_EQ(l.For("cpu")->Dir(), "/sys/fs/cgroup/cpu,cpuacct/user.slice");
  EXPECT_EQ(l.For("cpu"), l.For("cpuacct"));
  EXPECT_EQ(l.hierarchies.size(), 3u) << "name=systemd holds no controller";
}

TEST(CgroupLayoutTest, AContainersMountRootIsTakenOffItsGroups) {
  // A container sees its own part of the host's tree mounted at /sys/fs/cgroup.
  const char* mounts =
      "600 590 0:30 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"
      "601 590 0:31 /other /mnt/elsewhere rw - cgroup cgroup rw,pids\n";
  const char* groups = "0::/docker/abc/init\n7:pids:/docker/abc\n";
  CgroupLayout l = ParseCgroupLayout(mounts, groups, Files({}));
  ASSERT_NE(l.Tracking(), nullptr);
  EXPECT_EQ(l.Tracking()->Dir(), "/sys/fs/cgroup/init");
  EXPECT_EQ(l.For("pids"), nullptr) << "its group lies outside what that mount shows";
}

TEST(CgroupLayoutTest, EscapedMountPointsAndNoCgroupsAtAll) {
  CgroupLayout l =
      ParseCgroupLayout("41 31 0:38 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n", "0::/a\n", Files({}));
  ASSERT_NE(l.Tracking(), nullptr);
  EXPECT_EQ(l.Tracking()->Dir(), "/mnt/cg two/a");
  CgroupLayout none = ParseCgroupLayout("22 1 0:5 / /proc rw - proc proc rw\n", "", Files({}));
  EXPECT_EQ(none.Tracking(), nullptr);
  EXPECT_EQ(none.For("memory"), nullptr);
  auto made = Cgroup::Create(none, "x", false);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kFailedPrecondition);
}

std::string Writes(const std::vector<CgroupWrite>& w) {
  std::string s;
  for (const auto& x : w) s += x.file + "=" + x.value + (x.optional ? "?" : "") + " ";
  return s;
}

TEST(CgroupLimitsTest, WritesForV1AndV2) {
  CgroupLimits all{1.5, int64_t{256} << 20, 500};
  EXPECT_EQ(Writes(CgroupLimitWrites(all, true, true, true)),
            "cpu.max=150000 100000 memory.max=268435456 memory.swap.max=0? pids.max=500 ");
  EXPECT_EQ(Writes(CgroupLimitWrites(all, false, false, false)),
            "cpu.cfs_period_us=100000 cpu.cfs_quota_us=150000 memory.memsw.limit_in_bytes=268435456? "
            "memory.limit_in_bytes=268435456 memory.memsw.limit_in_bytes=268435456? pids.max=500 ");
  EXPECT_EQ(Writes(CgroupLimitWrites({}, true, true, true)), "") << "no limit: nothing written";
  EXPECT_EQ(Writes(CgroupLimitWrites({0.0001, std::nullopt, std::nullopt}, true, true, true)),
            "cpu.max=1000 100000 ")
      << "the kernel's smallest quota";
}

TEST(CgroupLimitsTest, CountersOfEitherVersion) {
  EXPECT_EQ(CgroupCounter("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n", "oom_kill"), 2);
  EXPECT_EQ(CgroupCounter("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", "oom_kill"), 7);
  EXPECT_EQ(CgroupCounter("max 12\n", "max"), 12);
  EXPECT_EQ(CgroupCounter("", "max"), 0);
}

TEST(CgroupLeftoversTest, OnlyASupervisorsNameGivesAPid) {
  EXPECT_EQ(GroupOwnerPid("tessera-local-4242", "tessera-local-"), 4242);
  EXPECT_EQ(GroupOwnerPid("tessera-local-", "tessera-local-"), std::nullopt);
  EXPECT_EQ(GroupOwnerPid("tessera-local-12x", "tessera-local-"), std::nullopt);
  EXPECT_EQ(GroupOwnerPid("tessera-local-0012", "tessera-local-"), std::nullopt);
  EXPECT_EQ(GroupOwnerPid("tessera-local-1234567890", "tessera-local-"), std::nullopt);
  EXPECT_EQ(GroupOwnerPid("tessera-node-7", "tessera-local-"), std::nullopt);
  EXPECT_EQ(GroupOwnerPid("tessera-job-ada-7", "tessera-job-"), std::nullopt);
}

// Real groups, where this process may make them.
class RealCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = CgroupLayout::Detect();
    name_ = "tessera-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto g = Cgroup::Create(layout_, name_, true);
    if (!g.ok()) GTEST_SKIP() << "cannot make control groups here: " << g.status().message();
    group_ = std::move(*g);
  }
  void TearDown() override {
    if (!group_) return;
    EXPECT_TRUE(group_->Kill(std::chrono::seconds(10)).ok());
    EXPECT_TRUE(group_->Remove().ok());
  }
  // A shell in the group (joined before it runs anything).
  std::unique_ptr<Process> ShellIn(const Cgroup& g, const std::string& script) {
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.cgroup_parent = &g;
    auto p = Process::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? std::move(*p) : nullptr;
  }
  CgroupLayout layout_;
  std::string name_;
  std::unique_ptr<Cgroup> group_;
};

TEST_F(RealCgroupTest, ADaemonThatLeftItsSessionIsStillInTheGroupAndEndsWithIt) {
  auto sh = ShellIn(*group_, "setsid sleep 1000 & exec sleep 1000");
  ASSERT_TRUE(sh);
  ASSERT_TRUE(testing::WaitUntil([&] { return group_->Pids().size() >= 2; }, std::chrono::seconds(10)))
      << group_->Pids().size();
  ASSERT_TRUE(group_->Kill(std::chrono::seconds(10)).ok());
  EXPECT_TRUE(group_->Empty());
  EXPECT_FALSE(sh->running());
}

TEST_F(RealCgroupTest, TheV1WayOfEndingAGroupToo) {
  // The same, tracked on a v1 hierarchy (pids), as on hosts without a v2 mount.
  CgroupLayout v1;
  for (const auto& h : layout_.hierarchies)
    if (!h.v2) v1.hierarchies.push_back(h);
  auto g = Cgroup::Create(v1, name_ + "-v1", false);
  if (!g.ok()) GTEST_SKIP() << "no v1 hierarchy here: " << g.status().message();
  EXPECT_FALSE(v1.Tracking()->v2);
  auto sh = ShellIn(**g, "setsid sleep 1000 & setsid sleep 1000 & exec sleep 1000");
  ASSERT_TRUE(testing::WaitUntil([&] { return (*g)->Pids().size() >= 3; }, std::chrono::seconds(10)));
  ASSERT_TRUE((*g)->Kill(std::chrono::seconds(10)).ok());
  EXPECT_TRUE((*g)->Empty());
  EXPECT_TRUE((*g)->Remove().ok());
}

TEST_F(RealCgroupTest, LeftoversOfAGoneSupervisorAreRemovedAndNoOtherGroup) {
  // A supervisor killed by SIGKILL leaves its group and its children's behind; the next one
  // removes them. A group whose owner lives, or that holds a process, stays.
  const std::string prefix = "tessera-test-sup" + std::to_string(::getpid()) + "-";
  auto dead = Process::Spawn(ProcessOptions{.argv = {"/bin/true"}});
  ASSERT_TRUE(dead.ok());
  ASSERT_TRUE((*dead)->Wait(std::chrono::seconds(10)).has_value());
  const pid_t gone = (*dead)->pid();
  auto left = Cgroup::Create(layout_, prefix + std::to_string(gone), false);
  ASSERT_TRUE(left.ok()) << left.status().message();
  auto child = (*left)->Child("p1");
  ASSERT_TRUE(child.ok());
  auto mine = Cgroup::Create(layout_, prefix + std::to_string(::getpid()), false);
  ASSERT_TRUE(mine.ok());
  auto busy_owner = Process::Spawn(ProcessOptions{.argv = {"/bin/true"}});
  ASSERT_TRUE(busy_owner.ok());
  ASSERT_TRUE((*busy_owner)->Wait(std::chrono::seconds(10)).has_value());
  auto busy = Cgroup::Create(layout_, prefix + std::to_string((*busy_owner)->pid()), false);
  ASSERT_TRUE(busy.ok());
  auto sh = ShellIn(**busy, "exec sleep 1000");
  ASSERT_TRUE(testing::WaitUntil([&] { return !(*busy)->Empty(); }, std::chrono::seconds(10)));

  EXPECT_EQ(RemoveLeftoverGroups(layout_, prefix), 1);
  EXPECT_FALSE(std::filesystem::exists((*left)->dir()));
  EXPECT_TRUE(std::filesystem::exists((*mine)->dir()));
  EXPECT_TRUE(std::filesystem::exists((*busy)->dir()));
  EXPECT_TRUE((*busy)->Kill(std::chrono::seconds(10)).ok());
  EXPECT_TRUE((*busy)->Remove().ok());
  EXPECT_TRUE((*mine)->Remove().ok());
}

TEST_F(RealCgroupTest, MemoryPastTheLimitIsAnOomKillTheGroupCounts) {
  ASSERT_TRUE(group_->SetLimits({std::nullopt, int64_t{32} << 20, std::nullopt}).ok());
  // A program that keeps what it reads grows until the kernel stops it.
  auto sh = ShellIn(*group_, "/usr/bin/python3 -c 'b = [bytearray(1 << 20) for _ in range(512)]'; echo done");
  ASSERT_TRUE(sh);
  ASSERT_TRUE(sh->Wait(std::chrono::seconds(60)).has_value());
  EXPECT_GE(group_->Usage().oom_kills, 1);
}

TEST_F(RealCgroupTest, AForkBombStopsAtTheTaskLimit) {
  ASSERT_TRUE(group_->SetLimits({std::nullopt, std::nullopt, 20}).ok());
  auto sh = ShellIn(*group_, "for i in $(seq 60); do sleep 1000 & done; wait");
  ASSERT_TRUE(sh);
  ASSERT_TRUE(testing::WaitUntil([&] { return group_->Usage().tasks_refused > 0; }, std::chrono::seconds(20)))
      << "tasks now: " << group_->Usage().tasks;
  EXPECT_LE(group_->Usage().tasks, 20);
  EXPECT_LE(group_->Pids().size(), 20u);
}

TEST_F(RealCgroupTest, ACpuLimitIsWrittenWhereTheKernelReadsIt) {
  ASSERT_TRUE(group_->SetLimits({0.5, std::nullopt, std::nullopt}).ok());
  const std::string dir = group_->DirOf("cpu");
  auto read = [](const std::string& p) -> std::optional<std::string> {
    auto s = ReadFile(p);
    if (!s.ok()) return std::nullopt;
    return *s;
  };
  if (layout_.For("cpu")->v2) {
    EXPECT_EQ(QuotaFromCpuMax(read(dir + "/cpu.max").value_or("")), 0.5);
  } else {
    EXPECT_EQ(QuotaFromCfs(read(dir + "/cpu.cfs_quota_us").value_or(""),
                           read(dir + "/cpu.cfs_period_us").value_or("")),
              0.5);
  }
}

}  // namespace
}  // namespace tessera
