// Unit tests of ChildState: every phase and event of a supervised process.
#include "supervise/child_state.h"

#include <gtest/gtest.h>

namespace tessera::supervise {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Kind = ChildAction::Kind;

TimePoint T(int64_t ms) { return TimePoint{} + milliseconds(ms); }

TEST(ChildStateTest, ACrashIsRestartedAfterItsBackoff) {
  ChildState c("pserver-0", Role::kPserver);
  EXPECT_EQ(c.Tick(T(0)).kind, Kind::kNone) << "never spawned: the supervisor starts it";
  c.Spawned(T(0));
  EXPECT_EQ(c.phase(), ChildPhase::kRunning);
  auto a = c.Exited(137, T(1000));
  EXPECT_EQ(c.phase(), ChildPhase::kBackoff);
  EXPECT_NE(a.event.find("pserver-0 killed by signal 9; restarting it in 0.5 s"), std::string::npos)
      << a.event;
  EXPECT_EQ(c.Tick(T(1400)).kind, Kind::kNone);
  EXPECT_EQ(c.Tick(T(1500)).kind, Kind::kSpawn);
  c.Spawned(T(1500));
  EXPECT_EQ(c.restarts(), 1);
  EXPECT_TRUE(c.active());
}

TEST(ChildStateTest, AFinishedTrainerIsDoneAndAStoppedChildIsNotRestarted) {
  ChildState t("trainer-0", Role::kTrainer);
  t.Spawned(T(0));
  auto a = t.Exited(0, T(5000));
  EXPECT_EQ(t.phase(), ChildPhase::kDone);
  EXPECT_TRUE(t.finished());
  EXPECT_FALSE(t.active());
  EXPECT_EQ(a.event, "trainer-0 finished");

  ChildState p("pserver-1", Role::kPserver);
  p.Spawned(T(0));
  EXPECT_EQ(p.Stop().kind, Kind::kTerminate);
  EXPECT_EQ(p.phase(), ChildPhase::kStopping);
  EXPECT_FALSE(p.active());
  EXPECT_EQ(p.Exited(143, T(100)).event, "") << "a stop we asked for is not news";
  EXPECT_EQ(p.phase(), ChildPhase::kDone);
  EXPECT_FALSE(p.finished()) << "stopped, not finished";
  EXPECT_EQ(p.Tick(T(100000)).kind, Kind::kNone);
}

TEST(ChildStateTest, StoppingAChildThatWaitsToRestartEndsIt) {
  ChildState c("trainer-2", Role::kTrainer);
  c.Spawned(T(0));
  c.Exited(1, T(100));
  ASSERT_EQ(c.phase(), ChildPhase::kBackoff);
  EXPECT_EQ(c.Stop().kind, Kind::kNone);
  EXPECT_EQ(c.phase(), ChildPhase::kDone);
  EXPECT_EQ(c.Tick(T(100000)).kind, Kind::kNone);
}

TEST(ChildStateTest, TheSameQuickExitThreeTimesFailsWithTheReason) {
  ChildState c("trainer-0", Role::kTrainer);
  int64_t t = 0;
  for (int i = 0; i < 2; ++i) {
    c.Spawned(T(t));
    c.Exited(1, T(t + 100));
    ASSERT_EQ(c.phase(), ChildPhase::kBackoff);
    t = std::chrono::duration_cast<milliseconds>(c.restart_at() - TimePoint{}).count();
    ASSERT_EQ(c.Tick(T(t)).kind, Kind::kSpawn);
  }
  c.Spawned(T(t));
  c.Exited(1, T(t + 100));
  EXPECT_EQ(c.phase(), ChildPhase::kFailed);
  EXPECT_NE(c.failure().find("trainer-0 exited with code 1 3 times in a row"), std::string::npos)
      << c.failure();
  EXPECT_EQ(c.Tick(T(t + 100000)).kind, Kind::kNone);
}

TEST(ChildStateTest, AChildWhoseRegistrationVanishedWhileItRunsIsKilledAndReplaced) {
  ChildOptions o;
  o.lease_grace = milliseconds(1000);
  ChildState c("pserver-0", Role::kPserver, o);
  c.Spawned(T(0));
  c.NotRegistered(T(500));
  EXPECT_EQ(c.Tick(T(5000)).kind, Kind::kNone) << "never registered yet (still starting): not judged";
  c.Registered(T(6000));
  c.NotRegistered(T(9000));  // its lease expired: frozen
  EXPECT_EQ(c.Tick(T(9500)).kind, Kind::kNone) << "within the grace period";
  c.Registered(T(9600));  // back (a glitch of the view): nothing happens
  c.NotRegistered(T(9700));
  EXPECT_EQ(c.Tick(T(10600)).kind, Kind::kNone);
  auto kill = c.Tick(T(10700));
  EXPECT_EQ(kill.kind, Kind::kKill);
  EXPECT_NE(kill.event.find("lost its lease but its process still runs"), std::string::npos);
  EXPECT_EQ(c.Tick(T(10800)).kind, Kind::kNone) << "killed once";
  auto exit = c.Exited(137, T(10800));
  EXPECT_EQ(c.phase(), ChildPhase::kBackoff);
  EXPECT_NE(
      exit.event.find("stopped answering (its lease expired while it still ran); restarting it in 0.0 s"),
      std::string::npos)
      << exit.event;
  EXPECT_EQ(c.restart_at(), T(10800)) << "the freeze cost a lease TTL already: no backoff on top";
  // A new incarnation starts unjudged.
  ASSERT_EQ(c.Tick(c.restart_at()).kind, Kind::kSpawn);
  c.Spawned(c.restart_at());
  c.NotRegistered(c.restart_at() + seconds(10));
  EXPECT_EQ(c.Tick(c.restart_at() + seconds(20)).kind, Kind::kNone);
}

TEST(ChildStateTest, LeaseKillsAreNotTakenForAMistakeOfTheChild) {
  // Frozen again and again, soon after each start: a replacement every time (the same-exit-code
  // rule is for the child's own mistakes; only the usual crash-loop bound applies).
  ChildState c("master-0", Role::kMaster);
  int64_t t = 0;
  for (int i = 0; i < 6; ++i) {
    c.Spawned(T(t));
    c.Registered(T(t + 10));
    c.NotRegistered(T(t + 20));
    ASSERT_EQ(c.Tick(T(t + 5000)).kind, Kind::kKill);
    c.Exited(137, T(t + 5001));
    ASSERT_EQ(c.phase(), ChildPhase::kBackoff) << "round " << i;
    t = std::chrono::duration_cast<milliseconds>(c.restart_at() - TimePoint{}).count() + 40000;
  }
}

TEST(ChildStateTest, AStoppingChildIsNotJudgedByItsLease) {
  ChildState c("trainer-1", Role::kTrainer);
  c.Spawned(T(0));
  c.Registered(T(10));
  c.Stop();
  c.NotRegistered(T(20));  // it deregistered as it was asked to stop
  EXPECT_EQ(c.Tick(T(60000)).kind, Kind::kNone);
}

TEST(ChildStateTest, EveryPhaseHasItsName) {
  EXPECT_STREQ(ChildPhaseName(ChildPhase::kRunning), "running");
  EXPECT_STREQ(ChildPhaseName(ChildPhase::kStopping), "stopping");
  EXPECT_STREQ(ChildPhaseName(ChildPhase::kBackoff), "waiting to restart");
  EXPECT_STREQ(ChildPhaseName(ChildPhase::kDone), "done");
  EXPECT_STREQ(ChildPhaseName(ChildPhase::kFailed), "failed");
}

}  // namespace
}  // namespace tessera::supervise
