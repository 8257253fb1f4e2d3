// Unit tests of the client's pure decisions: who initializes, the start-step agreement, waiting
// for a predecessor's registration, and the non-finite streak. Table-driven.
#include "client/client_rules.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(ClientRulesTest, WhoInitializesFollowsWhatIsReady) {
  struct Case {
    bool all, any;
    InitPlan plan;
    InitWork work;
  } cases[] = {
      {true, true, InitPlan::kNothing, InitWork::kNothing},
      {false, true, InitPlan::kAwaitRestorers, InitWork::kRestoreFromOthers},
      {false, false, InitPlan::kTakeLock, InitWork::kFreshInit},
      // "all ready" wins even if the any-flag lags behind it (seen through two reads).
      {true, false, InitPlan::kNothing, InitWork::kNothing},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(PlanInit(c.all, c.any), c.plan) << c.all << c.any;
    EXPECT_EQ(PlanInitUnderLock(c.all, c.any), c.work) << c.all << c.any;
  }
}

TEST(ClientRulesTest, StartStepAgreementAsksForTheLatestStepUntilAllAgree) {
  using O = StartStepAgreement::Outcome;
  struct Round {
    std::vector<int64_t> starts;
    O outcome;
    int64_t next_request;  // requested() after the round (or the agreed step)
  };
  struct Case {
    const char* name;
    int64_t first_request;
    int max_rounds;
    std::vector<Round> rounds;
  } cases[] = {
      {"one pserver", 0, 10, {{{7}, O::kAgreed, 7}}},
      {"agree at once", 3, 10, {{{3, 3, 3}, O::kAgreed, 3}}},
      {"one is ahead", 0, 10, {{{4, 5, 4}, O::kAskAgain, 5}, {{5, 5, 5}, O::kAgreed, 5}}},
      {"they keep moving",
       0,
       10,
       {{{1, 2}, O::kAskAgain, 2}, {{3, 2}, O::kAskAgain, 3}, {{3, 3}, O::kAgreed, 3}}},
      {"gives up after its rounds", 0, 2, {{{1, 2}, O::kAskAgain, 2}, {{3, 2}, O::kGiveUp, 3}}},
  };
  for (const auto& c : cases) {
    StartStepAgreement a(c.first_request, c.max_rounds);
    EXPECT_EQ(a.requested(), c.first_request);
    for (size_t r = 0; r < c.rounds.size(); ++r) {
      const auto& round = c.rounds[r];
      ASSERT_EQ(a.Answer(round.starts), round.outcome) << c.name << " round " << r;
      if (round.outcome == O::kAgreed) {
        EXPECT_EQ(a.agreed(), round.next_request) << c.name;
      } else {
        EXPECT_EQ(a.requested(), round.next_request) << c.name << " round " << r;
      }
    }
  }
  StartStepAgreement stuck(0, 3);
  EXPECT_NE(stuck.GiveUpStatus().message().find("3 rounds"), std::string::npos);
}

TEST(ClientRulesTest, AJoinTakesANewLeaseOnlyWhenItsLeaseWasGone) {
  const Status gone = Status::NotFound(
      "etcd 127.0.0.1:2379: txn on /tessera/j/trainers/7: etcdserver: "
      "requested lease not found");
  EXPECT_TRUE(LeaseGoneBeforeRegistering(gone, false));
  EXPECT_TRUE(LeaseGoneBeforeRegistering(Status::Unavailable("etcd did not answer"), true))
      << "its keeper saw it";
  EXPECT_FALSE(LeaseGoneBeforeRegistering(Status::NotFound("job 'j' not found"), false));
  EXPECT_FALSE(LeaseGoneBeforeRegistering(Status::AlreadyExists("trainer id '7' is held"), false));
  EXPECT_FALSE(LeaseGoneBeforeRegistering(Status::Unavailable("etcd did not answer"), false));
  EXPECT_FALSE(LeaseGoneBeforeRegistering(Status::OK(), true));
}

TEST(ClientRulesTest, OnlyADyingPredecessorIsWaitedFor) {
  ClientLimits limits;  // TTL 10 s: a predecessor with more than 25 s left is alive
  EXPECT_TRUE(MayBeAPredecessor(StatusCode::kAlreadyExists));
  EXPECT_TRUE(MayBeAPredecessor(StatusCode::kAborted));
  EXPECT_FALSE(MayBeAPredecessor(StatusCode::kInvalidArgument));
  EXPECT_FALSE(MayBeAPredecessor(StatusCode::kUnavailable));
  struct Case {
    bool present;
    int64_t remaining;
    bool expired;
    PredecessorVerdict verdict;
  } cases[] = {
      {true, 3, false, PredecessorVerdict::kWait},        // a dead predecessor's lease runs out
      {true, 25, false, PredecessorVerdict::kWait},       // exactly the limit
      {true, 26, false, PredecessorVerdict::kRefuse},     // renewed: a live trainer has the id
      {true, 3, true, PredecessorVerdict::kRefuse},       // out of time
      {false, -1, false, PredecessorVerdict::kRetryNow},  // gone meanwhile
      {false, -1, true, PredecessorVerdict::kRefuse},     // gone, but out of time
      {true, 0, false, PredecessorVerdict::kWait},        // expiring now
  };
  for (const auto& c : cases) {
    EXPECT_EQ(JudgePredecessor(c.present, c.remaining, c.expired, 10, limits), c.verdict)
        << c.present << " " << c.remaining << " " << c.expired;
  }
  limits.predecessor_slack_seconds = 0;
  EXPECT_EQ(JudgePredecessor(true, 21, false, 10, limits), PredecessorVerdict::kRefuse);
  EXPECT_EQ(limits.RestoreGrace(2), std::chrono::seconds(6));
}

TEST(ClientRulesTest, NonFiniteStreakSaysWhatThePolicyWants) {
  NonFiniteStreak skip(NonFinitePolicy::kSkip, 3);
  EXPECT_TRUE(skip.Dropped("w is NaN").ok());
  EXPECT_TRUE(skip.Dropped("w is NaN").ok());
  skip.Clean();
  EXPECT_EQ(skip.in_a_row(), 0);
  EXPECT_TRUE(skip.Dropped("w is NaN").ok());
  EXPECT_TRUE(skip.Dropped("w is NaN").ok());
  Status diverged = skip.Dropped("b is inf");
  EXPECT_EQ(diverged.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(diverged.message().find("3 steps in a row"), std::string::npos) << diverged;
  EXPECT_NE(diverged.message().find("b is inf"), std::string::npos) << diverged;

  NonFiniteStreak error(NonFinitePolicy::kError, 10);
  Status s = error.Dropped("w is NaN");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("policy is error"), std::string::npos) << s;
}

// Every state of a link's two lanes (each idle or running a call of group 0, 1 or 2) and every
// next call (group 0, 1 or 2): two calls run together only when they share a non-zero group, the
// second lane never runs alone, and an idle link always starts the next call on its main lane.
TEST(LaneRuleTest, TwoCallsRunTogetherOnlyInOneGroupAndTheSecondLaneNeverAlone) {
  int checked = 0;
  for (int r0 = 0; r0 < 2; ++r0) {
    for (int r1 = 0; r1 < 2; ++r1) {
      for (uint64_t g0 = 0; g0 < 3; ++g0) {
        for (uint64_t g1 = 0; g1 < 3; ++g1) {
          LaneState s;
          s.running[0] = r0;
          s.running[1] = r1;
          s.group[0] = r0 ? g0 : 0;
          s.group[1] = r1 ? g1 : 0;
          for (uint64_t next = 0; next < 3; ++next) {
            for (int lane = 0; lane < 2; ++lane) {
              const int other = 1 - lane;
              const bool may = MayStartOnLane(lane, next, s);
              SCOPED_TRACE(::testing::Message() << "running " << r0 << r1 << " groups " << s.group[0]
                                                << s.group[1] << " next " << next << " lane " << lane);
              ++checked;
              if (s.running[lane]) {
                EXPECT_FALSE(may);
              }
              if (may && s.running[other]) {
                EXPECT_TRUE(next != 0 && s.group[other] == next);
              }
              if (lane == 1 && may) {
                EXPECT_TRUE(s.running[0]);
              }
              if (!s.running[0] && !s.running[1]) {
                EXPECT_EQ(may, lane == 0);
              }
              // The other lane runs a call of the same group: this lane may join it.
              if (!s.running[lane] && s.running[other] && next != 0 && s.group[other] == next) {
                EXPECT_TRUE(may);
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 3 * 3 * 3 * 2);
  EXPECT_FALSE(MayStartOnLane(2, 1, LaneState{}));
}

// Who scans a gradient for NaN and infinity, for every job shape: the pserver only for a waited
// push to a job's single pserver that is not async; nobody when the job allows them.
TEST(ClientRulesTest, WhoScansANonFiniteGradient) {
  int checked = 0;
  for (int pservers : {1, 2, 3}) {
    for (auto kind :
         {ConsistencyMode::Kind::kSync, ConsistencyMode::Kind::kSsp, ConsistencyMode::Kind::kAsync}) {
      for (bool allow : {false, true}) {
        for (bool waited : {false, true}) {
          JobConfig job;
          job.pservers = pservers;
          job.mode.kind = kind;
          const NonFiniteScan who = WhoScans(job, allow, waited);
          if (allow) {
            EXPECT_EQ(who, NonFiniteScan::kNone);
          } else if (waited && pservers == 1 && kind != ConsistencyMode::Kind::kAsync) {
            EXPECT_EQ(who, NonFiniteScan::kPserver);
          } else {
            EXPECT_EQ(who, NonFiniteScan::kTrainer);
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 36);
}

}  // namespace
}  // namespace tessera
