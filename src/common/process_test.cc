// Unit tests of Process: a child that cannot be run says so in its log; signals, stops and kills
// reach everything the child started (its process group), and nothing it started outlives it.
#include "common/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/cgroup.h"
#include "common/files.h"
#include "common/strings.h"
#include "harness/pids.h"

namespace tessera {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("process-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override { (void)RemoveAll(dir_); }

  // `sh -c script`, in a control group of its own below `cgroup` when one is given.
  std::unique_ptr<Process> Shell(const std::string& script, const Cgroup* cgroup = nullptr) {
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.log_path = dir_ + "/child.log";
    o.cgroup_parent = cgroup;
    auto p = Process::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }

  // The pids the script printed, one per line, once `n` are there.
  std::vector<pid_t> PrintedPids(Process& p, size_t n) {
    std::vector<pid_t> pids;
    auto deadline = std::chrono::steady_clock::now() + seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      pids.clear();
      std::istringstream in(p.Output());
      for (std::string line; std::getline(in, line);) {
        auto v = ParseInt64(line, "pid");
        if (v.ok()) pids.push_back(static_cast<pid_t>(*v));
      }
      if (pids.size() >= n) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return pids;
  }

  static bool Alive(pid_t pid) { return testing::ProcessAlive(pid); }
  static bool GoneWithin(pid_t pid, std::chrono::milliseconds timeout) {
    return testing::WaitUntil([&] { return !Alive(pid); }, timeout);
  }

  std::string dir_;
};

TEST_F(ProcessTest, AProgramThatCannotBeRunSaysSoInItsLog) {
  ProcessOptions o;
  o.argv = {"/nonexistent/tessera-test-program", "--flag"};
  o.log_path = dir_ + "/child.log";
  auto p = Process::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  auto code = (*p)->Wait(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 127);
  EXPECT_EQ((*p)->Output(), "cannot execute /nonexistent/tessera-test-program: errno 2\n");  // ENOENT
}

TEST_F(ProcessTest, ALogThatCannotBeOpenedIsAnErrorNotTheParentsTerminal) {
  // Its directory is missing: the child once wrote to the parent's stdout instead, and whoever
  // waited for a line in the log waited in vain.
  ProcessOptions o;
  o.argv = {"/bin/echo", "hello"};
  o.log_path = dir_ + "/missing/child.log";
  auto p = Process::Spawn(o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(o.log_path), std::string::npos) << p.status();
  EXPECT_NE(p.status().message().find("/bin/echo"), std::string::npos) << p.status();
}

TEST_F(ProcessTest, TerminateStopsEverythingTheShellStarted) {
  // A shell that starts two programs and waits for them, as `--trainer-cmd` does.
  auto p = Shell("sleep 1000 & echo $!; sleep 1000 & echo $!; wait");
  ASSERT_TRUE(p);
  auto pids = PrintedPids(*p, 2);
  ASSERT_EQ(pids.size(), 2u) << p->Output();
  EXPECT_TRUE(Alive(pids[0]) && Alive(pids[1]));
  p->Terminate(seconds(10));
  EXPECT_FALSE(p->running());
  for (pid_t pid : pids) EXPECT_TRUE(GoneWithin(pid, seconds(10))) << "pid " << pid << " outlived its shell";
}

TEST_F(ProcessTest, WhatAnExitedChildLeftRunningIsKilledWhenItIsReaped) {
  auto p = Shell("sleep 1000 & echo $!; exit 4");
  ASSERT_TRUE(p);
  auto pids = PrintedPids(*p, 1);
  ASSERT_EQ(pids.size(), 1u) << p->Output();
  auto code = p->Wait(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 4);
  EXPECT_TRUE(GoneWithin(pids[0], seconds(10)));
}

TEST_F(ProcessTest, KillReachesTheGroupAndSignalReachesEveryMember) {
  auto p = Shell("sleep 1000 & echo $!; wait");
  ASSERT_TRUE(p);
  auto pids = PrintedPids(*p, 1);
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_TRUE(p->Signal(SIGSTOP).ok());
  // Stopped processes die on SIGKILL.
  p->Kill();
  EXPECT_FALSE(p->running());
  EXPECT_EQ(p->exit_code(), 128 + SIGKILL);
  EXPECT_TRUE(GoneWithin(pids[0], seconds(10)));
}

TEST_F(ProcessTest, StopEscalatesToSigkillAfterTheGracePeriod) {
  auto p = Shell("trap '' TERM; echo $$; while :; do sleep 0.05; done");
  ASSERT_TRUE(p);
  ASSERT_EQ(PrintedPids(*p, 1).size(), 1u);
  auto start = std::chrono::steady_clock::now();
  p->Stop(milliseconds(300));
  EXPECT_TRUE(p->stopping());
  ASSERT_TRUE(p->Wait(seconds(30)).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(300));
  EXPECT_EQ(p->exit_code(), 128 + SIGKILL);
}

TEST_F(ProcessTest, WithinTheGracePeriodWhatTheChildStartedMayFinishItsShutdown) {
  // The outer shell dies of SIGTERM at once; its child traps it and needs a moment to clean up.
  const std::string marker = dir_ + "/cleaned";
  auto p = Shell("sh -c 'trap \"sleep 0.3; touch " + marker +
                 "; exit 0\" TERM; echo $$; while :; do sleep 0.05; done' & wait");
  ASSERT_TRUE(p);
  auto pids = PrintedPids(*p, 1);
  ASSERT_EQ(pids.size(), 1u);
  auto code = p->Terminate(seconds(20));
  ASSERT_TRUE(code.has_value()) << "escalated to SIGKILL";
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the child's shutdown was cut short";
  EXPECT_FALSE(Alive(pids[0]));
}

TEST_F(ProcessTest, AChildStartsWithNoSignalIgnoredOrBlockedWhateverItsParentDoes) {
  // A parent that ignores SIGTERM (or blocks it to sigwait for it) must not pass that on: the
  // child would never stop when asked. Signals 32 and 33 too, which glibc's sigaction() cannot
  // reset: GNU make leaves them ignored in everything it runs (so `make test` did, here).
  const int kIgnored[] = {SIGTERM, SIGHUP, 32, 33, SIGRTMAX};
  RawSignalAction ignore;
  ignore.handler = SIG_IGN;
  RawSignalAction old[std::size(kIgnored)];
  for (size_t i = 0; i < std::size(kIgnored); ++i) {
    ASSERT_EQ(RawSigaction(kIgnored[i], &ignore, &old[i]), 0) << "signal " << kIgnored[i];
  }
  auto p = Shell("grep -E '^Sig(Blk|Ign)' /proc/self/status; echo ready; exec sleep 1000");
  for (size_t i = 0; i < std::size(kIgnored); ++i) RawSigaction(kIgnored[i], &old[i], nullptr);
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->WaitForOutput("ready", seconds(30)));
  EXPECT_NE(p->Output().find("SigBlk:\t0000000000000000"), std::string::npos) << p->Output();
  EXPECT_NE(p->Output().find("SigIgn:\t0000000000000000"), std::string::npos) << p->Output();
  auto code = p->Terminate(seconds(10));
  ASSERT_TRUE(code.has_value()) << "SIGTERM did not stop it: escalated to SIGKILL";
  EXPECT_EQ(*code, 128 + SIGTERM);
}

// With a control group, what the child started is reached even after it left the process group.
class ProcessInCgroupTest : public ProcessTest {
 protected:
  void SetUp() override {
    ProcessTest::SetUp();
    auto g =
        Cgroup::Create(CgroupLayout::Detect(), "tessera-process-test-" + std::to_string(::getpid()), false);
    if (!g.ok()) GTEST_SKIP() << "cannot make control groups here: " << g.status().message();
    parent_ = std::move(*g);
  }
  void TearDown() override {
    if (parent_) {
      EXPECT_TRUE(parent_->Kill(seconds(10)).ok());
      EXPECT_TRUE(parent_->Remove().ok()) << "a child's group was left behind";
    }
    ProcessTest::TearDown();
  }
  std::unique_ptr<Process> ShellInGroup(const std::string& script) { return Shell(script, parent_.get()); }
  std::unique_ptr<Cgroup> parent_;
};

TEST_F(ProcessInCgroupTest, ADaemonThatLeftItsProcessGroupEndsWhenTheChildExits) {
  // `setsid` puts the sleep in a session (and process group) of its own, out of reach of a
  // signal to the child's group: only the control group still holds it.
  auto p = ShellInGroup("setsid sleep 1000 & echo $!; exit 3");
  ASSERT_TRUE(p);
  auto pids = PrintedPids(*p, 1);
  ASSERT_EQ(pids.size(), 1u) << p->Output();
  auto code = p->Wait(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 3);
  EXPECT_TRUE(GoneWithin(pids[0], seconds(10))) << "the daemon outlived the child that started it";
  EXPECT_TRUE(parent_->Empty());
}

TEST_F(ProcessInCgroupTest, AStopReachesADaemonAndLetsItFinishWithinTheGracePeriod) {
  const std::string marker = dir_ + "/cleaned";
  auto p = ShellInGroup("setsid sh -c 'trap \"sleep 0.3; touch " + marker +
                        "; exit 0\" TERM; echo $$; while :; do sleep 0.05; done' & wait");
  ASSERT_TRUE(p);
  auto pids = PrintedPids(*p, 1);
  ASSERT_EQ(pids.size(), 1u) << p->Output();
  auto code = p->Terminate(seconds(20));
  ASSERT_TRUE(code.has_value()) << "escalated to SIGKILL";
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the daemon never heard the stop";
  EXPECT_TRUE(GoneWithin(pids[0], seconds(10)));
}

TEST_F(ProcessInCgroupTest, TheDestructorEndsWhatIsLeftAndRemovesTheChildsGroup) {
  pid_t daemon = 0;
  {
    auto p = ShellInGroup("setsid sleep 1000 & echo $!; exec sleep 1000");
    ASSERT_TRUE(p);
    auto pids = PrintedPids(*p, 1);
    ASSERT_EQ(pids.size(), 1u) << p->Output();
    daemon = pids[0];
  }
  EXPECT_TRUE(GoneWithin(daemon, seconds(10)));
  EXPECT_TRUE(parent_->Remove().ok()) << "the child's group is still there";
  parent_.reset();
}

}  // namespace
}  // namespace tessera
