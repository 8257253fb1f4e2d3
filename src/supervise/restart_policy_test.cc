#include "supervise/restart_policy.h"

#include <gtest/gtest.h>

namespace tessera::supervise {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RestartPolicyTest, FinishedTrainersAreDoneAndStoppedProcessesStayStopped) {
  RestartPolicy p;
  EXPECT_EQ(p.OnExit(Role::kTrainer, 0, seconds(5), false).kind, Decision::Kind::kDone);
  EXPECT_EQ(p.OnExit(Role::kPserver, 137, seconds(5), /*stopping=*/true).kind, Decision::Kind::kDone);
  // A pserver or master that exits 0 on its own is restarted: they do not finish.
  EXPECT_EQ(p.OnExit(Role::kPserver, 0, seconds(5), false).kind, Decision::Kind::kRestart);
}

TEST(RestartPolicyTest, BackoffDoublesForQuickFailuresAndResetsAfterAStableRun) {
  RestartOptions o;
  o.initial_backoff = milliseconds(100);
  o.max_backoff = milliseconds(1000);
  RestartPolicy p(o);
  EXPECT_EQ(p.OnExit(Role::kPserver, 137, seconds(1), false).delay, milliseconds(100));
  EXPECT_EQ(p.OnExit(Role::kPserver, 137, seconds(1), false).delay, milliseconds(200));
  EXPECT_EQ(p.OnExit(Role::kPserver, 137, seconds(1), false).delay, milliseconds(400));
  EXPECT_EQ(p.OnExit(Role::kPserver, 137, seconds(1), false).delay, milliseconds(800));
  EXPECT_EQ(p.OnExit(Role::kPserver, 137, seconds(1), false).delay, milliseconds(1000));
  auto after_stable = p.OnExit(Role::kPserver, 3, seconds(60), false);
  EXPECT_EQ(after_stable.delay, milliseconds(100));
  EXPECT_EQ(after_stable.reason, "lost its lease");
  EXPECT_EQ(p.OnExit(Role::kTrainer, 137, seconds(1), false).reason, "killed by signal 9");
}

TEST(RestartPolicyTest, GivesUpOnACrashLoop) {
  RestartOptions o;
  o.max_quick_failures = 3;
  RestartPolicy p(o);
  // Killed from outside each time (signals do not count as the same mistake).
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(p.OnExit(Role::kMaster, 137, milliseconds(10), false).kind, Decision::Kind::kRestart);
  auto d = p.OnExit(Role::kMaster, 137, milliseconds(10), false);
  EXPECT_EQ(d.kind, Decision::Kind::kGiveUp);
  EXPECT_NE(d.reason.find("master failed 4 times"), std::string::npos) << d.reason;
}

TEST(RestartPolicyTest, TheSameExitCodeThreeTimesInARowGivesUpAtOnce) {
  struct Case {
    std::vector<int> codes;  // quick exits, in order
    Decision::Kind last;     // the decision on the last one
  };
  const Case cases[] = {
      {{1, 1, 1}, Decision::Kind::kGiveUp},         // a script with a syntax error
      {{2, 2, 2}, Decision::Kind::kGiveUp},         // python: cannot open file
      {{127, 127, 127}, Decision::Kind::kGiveUp},   // sh: command not found
      {{1, 2, 1}, Decision::Kind::kRestart},        // different mistakes: keep trying
      {{1, 1, 137, 1}, Decision::Kind::kRestart},   // a kill from outside breaks the run
      {{3, 3, 3, 3}, Decision::Kind::kRestart},     // lost leases come from outside
      {{137, 137, 137}, Decision::Kind::kRestart},  // so do signals
  };
  for (const auto& c : cases) {
    RestartPolicy p;
    Decision d;
    for (int code : c.codes) d = p.OnExit(Role::kTrainer, code, milliseconds(200), false);
    EXPECT_EQ(d.kind, c.last) << "codes " << ::testing::PrintToString(c.codes) << ": " << d.reason;
  }
  // A run that stayed up a while starts the count over.
  RestartPolicy p;
  p.OnExit(Role::kTrainer, 1, milliseconds(200), false);
  p.OnExit(Role::kTrainer, 1, milliseconds(200), false);
  EXPECT_EQ(p.OnExit(Role::kTrainer, 1, seconds(60), false).kind, Decision::Kind::kRestart);
  auto d = p.OnExit(Role::kPserver, 1, milliseconds(200), false);
  EXPECT_EQ(d.kind, Decision::Kind::kRestart);
}

}  // namespace
}  // namespace tessera::supervise
