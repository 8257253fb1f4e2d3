// Frozen processes under `tessera local`: a pserver, the leading master or a trainer stops
// answering while its process lives (SIGSTOP, never resumed: a hung disk, a paused VM). Its lease
// expires, the supervisor treats it as dead (kills it, starts a replacement), the others move to
// the replacement, and the job finishes. Each test prints the time from the stop to training
// moving again (the goal is within the lease TTL + 2 s; measured, not asserted). The jobs run 10
// passes, several seconds, so that the freeze lands well before the end on a loaded machine (a
// pass of this model takes well under a second).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <regex>

#include "coord/election.h"
#include "harness/pids.h"
#include "local/local_fixture.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

constexpr int kTtl = 3;  // the fixture's --lease-ttl

class FrozenTest : public LocalTest {
 protected:
  void SetUp() override {
    LocalTest::SetUp();
    UploadFashionMnist();
  }

  // Waits until training is under way, freezes `pid`, and returns how long it took until the
  // job's step moved `steps` past where it was at the freeze.
  double FreezeAndTimeRecovery(etcd::EtcdClient* etcd, const std::string& job, pid_t pid, int64_t steps = 10) {
    int64_t at = MasterStatus(etcd, job).step();
    EXPECT_EQ(::kill(pid, SIGSTOP), 0);
    auto stopped = std::chrono::steady_clock::now();
    bool moved = WaitUntil([&] { return MasterStatus(etcd, job).step() >= at + steps; }, seconds(180),
                           std::chrono::milliseconds(50));
    EXPECT_TRUE(moved) << "training did not move again after the freeze\n" << LogsTail(30);
    return SecondsSince(stopped);
  }

  void ExpectFinished(Subprocess& p, pid_t frozen, const std::string& what) {
    auto code = p.Wait(seconds(300));
    ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
    ASSERT_EQ(*code, 0) << p.Output() << LogsTail();
    EXPECT_NE(p.Output().find(what + " lost its lease but its process still runs"), std::string::npos)
        << p.Output();
    std::string alive;
    EXPECT_TRUE(AllGone({frozen}, seconds(10), &alive)) << "the frozen process was left behind";
    auto r = Result();
    EXPECT_EQ(r["failed_tasks"], 0);
    EXPECT_GE(r["metrics"]["accuracy"].get<double>(), 0.75);
  }

  // Runs `job` (the mlp, 10 passes, a checkpoint every pass, plus `args`), freezes pserver 0 for
  // good once training is under way, prints how long until it moved again, and checks the end.
  void FreezePserverZeroAndFinish(const std::string& job, std::vector<std::string> args, const char* what) {
    std::vector<std::string> all = {
        "--dataset", "fm", "--eval-dataset",     "fm-test", "--model", "mlp", "--model-arg", "hidden=64",
        "--passes",  "10", "--checkpoint-every", "1",       "--job",   job};
    all.insert(all.end(), args.begin(), args.end());
    Subprocess& p = StartLocal(all);
    auto etcd = JobEtcd();
    ASSERT_NE(etcd, nullptr);
    ASSERT_TRUE(UnderWay(etcd.get(), job, p));
    auto pid = static_cast<pid_t>(RegisteredPid(etcd.get(), keys::PserverPrefix(job), "0"));
    ASSERT_GT(pid, 0);
    double took = FreezeAndTimeRecovery(etcd.get(), job, pid);
    std::printf("%s frozen for good: training moved again %.2f s after the stop (lease TTL %d s)\n", what,
                took, kTtl);
    ExpectFinished(p, pid, "pserver-0");
  }

  bool UnderWay(etcd::EtcdClient* etcd, const std::string& job, Subprocess& p) {
    bool ok = WaitUntil([&] { return MasterStatus(etcd, job).samples() > 5000; }, seconds(120),
                        std::chrono::milliseconds(100));
    EXPECT_TRUE(ok) << p.Output() << LogsTail();
    return ok;
  }
};

TEST_F(FrozenTest, AFrozenPserverIsReplacedAndTheJobFinishes) {
  FreezePserverZeroAndFinish("fps", {"--pservers", "2", "--trainers", "2"}, "pserver 0");
}

// One trainer and one pserver over shared memory: the trainer's step goes in its window, which
// the frozen pserver maps. The call it was waiting on fails, the window is renewed (a pserver
// that thawed could write only into memory the trainer no longer reads), and the trainer goes on
// in the window with the replacement.
TEST_F(FrozenTest, AFrozenPserverOfATrainerWorkingInItsWindowIsReplacedAndTheWindowRenewed) {
  FreezePserverZeroAndFinish("fwin", {"--pservers", "1", "--trainers", "1", "--transport", "shm"},
                             "pserver 0 of a 1x1 shm job");
  if (HasFatalFailure()) return;
  auto log = ReadFile(run() + "/logs/trainer-0.log");
  ASSERT_TRUE(log.ok());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*log, m,
                                std::regex(R"(in place: (\d+) requests, (\d+) replies \((\d+) renewals?\))")))
      << *log;
  std::printf("trainer: %s\n", m[0].str().c_str());
  EXPECT_GE(std::stoi(m[3]), 1) << m[0];
  EXPECT_GE(std::stoi(m[2]), 5000) << m[0];  // 10 passes of 938 steps, most in the window
}

TEST_F(FrozenTest, AFrozenLeadingMasterIsReplacedByTheStandbyAndTheJobFinishes) {
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--model-arg",
                              "hidden=64", "--trainers", "2", "--passes", "10", "--standby-masters", "1",
                              "--job", "fms"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(UnderWay(etcd.get(), "fms", p));
  auto leader = Election::Leader(etcd.get(), keys::MasterElectionPrefix("fms"));
  ASSERT_TRUE(leader.ok() && leader->has_value());
  auto pid = static_cast<pid_t>(nlohmann::json::parse((*leader)->value)["pid"].get<int64_t>());
  // Progress counts steps the trainers report through the master: it moves again only once
  // the standby leads and the trainers follow it.
  double took = FreezeAndTimeRecovery(etcd.get(), "fms", pid);
  std::printf("leading master frozen for good: training moved again %.2f s after the stop (lease TTL %d s)\n",
              took, kTtl);
  auto code = p.Wait(seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail();
  EXPECT_NE(p.Output().find("lost its lease but its process still runs"), std::string::npos) << p.Output();
  std::string alive;
  EXPECT_TRUE(AllGone({pid}, seconds(10), &alive));
  EXPECT_EQ(Result()["failed_tasks"], 0);
}

TEST_F(FrozenTest, AFrozenTrainerLeavesTheBarrierItsTasksReturnAndTheJobFinishes) {
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--model-arg",
                              "hidden=64", "--trainers", "2", "--passes", "10", "--job", "ftr"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(UnderWay(etcd.get(), "ftr", p));
  auto pid = static_cast<pid_t>(RegisteredPid(etcd.get(), keys::TrainerPrefix("ftr"), "1"));
  ASSERT_GT(pid, 0);
  double took = FreezeAndTimeRecovery(etcd.get(), "ftr", pid);
  std::printf("trainer 1 frozen for good (sync): training moved again %.2f s after the stop (lease TTL %d s)\n",
              took, kTtl);
  ExpectFinished(p, pid, "trainer-1");
}

}  // namespace
}  // namespace tessera::testing
