#include "pserver/consistency.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "pserver/step_pieces.h"

namespace tessera {
namespace {

Consistency Sync(int min_trainers = 1) { return Consistency({ConsistencyMode{}, min_trainers}); }

Consistency Ssp(int s) {
  ConsistencyMode m;
  m.kind = ConsistencyMode::Kind::kSsp;
  m.staleness = s;
  return Consistency({m, 1});
}

Consistency Async() {
  ConsistencyMode m;
  m.kind = ConsistencyMode::Kind::kAsync;
  return Consistency({m, 1});
}

// Applies a pending barrier (as the shell would) and returns it.
std::optional<Consistency::Barrier> Drain(Consistency& c, std::vector<uint64_t>* released = nullptr) {
  std::optional<Consistency::Barrier> first;
  while (true) {  // an applied barrier may make the next one ready at once (empty steps)
    auto r = c.TakeReady();
    if (released) released->insert(released->end(), r.pulls.begin(), r.pulls.end());
    if (!r.barrier) return first;
    if (!first) first = r.barrier;
    c.BarrierApplied(r.barrier->step);
  }
}

TEST(ConsistencySyncTest, BarrierWaitsForEveryMemberAndOrdersContributorsById) {
  auto c = Sync();
  ASSERT_EQ(*c.Join("10", 1, 0), 0);
  ASSERT_EQ(*c.Join("2", 1, 0), 0);
  ASSERT_EQ(*c.Join("a", 1, 0), 0);
  EXPECT_EQ(*c.Push("a", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_EQ(*c.Push("10", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_FALSE(Drain(c));
  EXPECT_EQ(*c.Push("2", 1, 0), Consistency::PushVerdict::kHold);
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->step, 0);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"2", "10", "a"}));
  EXPECT_EQ(c.version(), 1);
}

TEST(ConsistencySyncTest, PullsForTheNextVersionWaitUntilTheBarrier) {
  auto c = Sync();
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  ASSERT_TRUE(c.Join("1", 1, 0).ok());
  EXPECT_TRUE(*c.Pull(100, "0", 1, 0));   // current version: at once
  EXPECT_FALSE(*c.Pull(101, "0", 1, 1));  // next version: waits
  EXPECT_EQ(c.Pull(102, "0", 1, 2).status().code(), StatusCode::kOutOfRange);
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  std::vector<uint64_t> released;
  EXPECT_FALSE(Drain(c, &released));
  EXPECT_TRUE(released.empty());
  ASSERT_TRUE(c.Push("1", 1, 0).ok());
  auto barrier = Drain(c, &released);
  ASSERT_TRUE(barrier);
  // The barrier names the pulls its apply will release, so their replies can be written by it.
  EXPECT_EQ(barrier->releases, std::vector<uint64_t>{101});
  EXPECT_EQ(released, std::vector<uint64_t>{101});
  EXPECT_EQ(c.waiting_pulls(), 0u);
}

TEST(ConsistencySyncTest, RetriedPushIsADuplicateBeforeAndAfterTheStepCloses) {
  auto c = Sync();
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  ASSERT_TRUE(c.Join("1", 1, 0).ok());
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kDuplicate);
  ASSERT_TRUE(c.Push("1", 1, 0).ok());
  ASSERT_TRUE(Drain(c));
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kDuplicate);
}

TEST(ConsistencySyncTest, ClosedFutureAndUnjoinedPushesAreRejectedWithWhereToResume) {
  auto c = Sync();
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  ASSERT_TRUE(Drain(c));
  ASSERT_TRUE(c.Push("0", 1, 1).ok());
  ASSERT_TRUE(Drain(c));
  // Step 0 closed without a push from a late member: "closed, resume at step 2".
  ASSERT_TRUE(c.Join("1", 1, 0).ok());
  auto closed = c.Push("1", 1, 0);
  EXPECT_EQ(closed.status().code(), StatusCode::kAborted);
  EXPECT_NE(closed.status().message().find("resume at step 2"), std::string::npos) << closed.status();
  EXPECT_EQ(c.Push("0", 1, 5).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.Push("stranger", 1, 2).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.Push("0", 2, 2).status().code(), StatusCode::kFailedPrecondition);  // wrong epoch
}

TEST(ConsistencySyncTest, JoinerEntersTheCurrentStepOnlyIfNobodyPushedYet) {
  auto c = Sync();
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  EXPECT_EQ(*c.Join("1", 1, 0), 0);  // nobody pushed: joins step 0
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  EXPECT_EQ(*c.Join("2", 1, 0), 1);  // "0" pushed already: from step 1
  EXPECT_EQ(c.Push("2", 1, 0).status().code(), StatusCode::kAborted);
  ASSERT_TRUE(c.Push("1", 1, 0).ok());
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"0", "1"}));
  // From step 1 the barrier waits for "2" too.
  ASSERT_TRUE(c.Push("0", 1, 1).ok());
  ASSERT_TRUE(c.Push("1", 1, 1).ok());
  EXPECT_FALSE(Drain(c));
  ASSERT_TRUE(c.Push("2", 1, 1).ok());
  EXPECT_EQ(Drain(c)->contributors.size(), 3u);
}

TEST(ConsistencySyncTest, MemberLeavingMidStepCompletesTheBarrierWithoutIt) {
  auto c = Sync();
  for (auto id : {"0", "1", "2"}) ASSERT_TRUE(c.Join(id, 1, 0).ok());
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  ASSERT_TRUE(c.Push("2", 1, 0).ok());
  EXPECT_FALSE(Drain(c));
  c.Leave("1", 1);
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"0", "2"}));
}

TEST(ConsistencySyncTest, PushOfADeadTrainerStillCounts) {
  auto c = Sync();
  for (auto id : {"0", "1"}) ASSERT_TRUE(c.Join(id, 1, 0).ok());
  ASSERT_TRUE(c.Push("1", 1, 0).ok());
  c.Leave("1", 1);
  EXPECT_FALSE(Drain(c));  // still waiting for "0"
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  EXPECT_EQ(Drain(c)->contributors, (std::vector<std::string>{"0", "1"}));
}

TEST(ConsistencySyncTest, LeaveWithAStaleEpochIsIgnoredAndRejoinReplacesTheOldIncarnation) {
  auto c = Sync();
  ASSERT_TRUE(c.Join("0", 5, 0).ok());
  c.Leave("0", 4);
  EXPECT_EQ(c.members().size(), 1u);
  EXPECT_EQ(c.Join("0", 3, 0).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Join("0", 9, 0).ok());  // restarted trainer, new registration
  EXPECT_EQ(c.Push("0", 5, 0).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(c.Push("0", 9, 0).ok());
}

TEST(ConsistencySyncTest, MinTrainersHoldsTheFirstStepAndLetsLateStartersIn) {
  auto c = Sync(3);
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  EXPECT_FALSE(Drain(c));            // only one of three
  EXPECT_EQ(*c.Join("1", 1, 0), 0);  // still enters step 0 although "0" pushed
  ASSERT_TRUE(c.Push("1", 1, 0).ok());
  EXPECT_FALSE(Drain(c));
  EXPECT_EQ(*c.Join("2", 1, 0), 0);
  ASSERT_TRUE(c.Push("2", 1, 0).ok());
  EXPECT_EQ(Drain(c)->contributors.size(), 3u);
  // After the first step min_trainers no longer matters: one trainer alone can go on.
  c.Leave("1", 1);
  c.Leave("2", 1);
  ASSERT_TRUE(c.Push("0", 1, 1).ok());
  EXPECT_TRUE(Drain(c));
}

TEST(ConsistencySyncTest, RestoredMidJobDoesNotWaitForMinTrainers) {
  // A replaced pserver re-initialized at step 611 by the one trainer still running; another
  // trainer joins it at 612 (it agreed on 612 with the pservers that went on). Waiting for two
  // pushers at 611 would hang the job.
  Consistency c({ConsistencyMode{}, 2}, 611);
  ASSERT_TRUE(c.Join("1", 1, 611).ok());
  EXPECT_EQ(*c.Join("0", 2, 612), 612);
  ASSERT_TRUE(c.Push("1", 1, 611).ok());
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, std::vector<std::string>{"1"});
}

TEST(ConsistencySyncTest, RestoredAtVersionZeroCatchesUpWithTrainersAhead) {
  // The job was killed before this pserver wrote a checkpoint past its initial values, while
  // another pserver wrote one of version 85: on resume the trainers agree on step 85 with it.
  // Before, a restore at version 0 waited as a new job's group does, and steps 0..84 never
  // closed ("pull for version 86 is more than one step ahead of the pserver (at version 0)").
  Consistency c({ConsistencyMode{}, 2}, 0, /*mid_job=*/true);
  EXPECT_EQ(*c.Join("0", 1, 85), 85);
  auto b = Drain(c);  // steps 0..84 close with nobody (the shell applies them between events)
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->contributors.empty());
  EXPECT_EQ(c.version(), 85);
  EXPECT_EQ(*c.Join("1", 1, 85), 85);
  EXPECT_FALSE(Drain(c));
  ASSERT_TRUE(c.Push("0", 1, 85).ok());
  EXPECT_TRUE(*c.Pull(3, "0", 1, 86) == false);
  ASSERT_TRUE(c.Push("1", 1, 85).ok());
  std::vector<uint64_t> released;
  b = Drain(c, &released);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(released, std::vector<uint64_t>{3});
  // A new job's pserver at version 0 still waits for its group (MinTrainersHoldsTheFirstStep...).
  Consistency fresh({ConsistencyMode{}, 2}, 0);
  EXPECT_EQ(*fresh.Join("0", 1, 85), 85);
  EXPECT_FALSE(Drain(fresh));
}

TEST(ConsistencySyncTest, StepsNobodyTakesPartInCloseEmpty) {
  // Both trainers agreed with another pserver to go on at step 3 while this one is at step 1.
  Consistency c({ConsistencyMode{}, 1}, 1);
  ASSERT_TRUE(c.Join("0", 1, 1).ok());
  ASSERT_TRUE(c.Join("1", 1, 1).ok());
  EXPECT_FALSE(*c.Pull(5, "0", 1, 2));
  EXPECT_EQ(*c.Join("0", 1, 3), 3);
  EXPECT_FALSE(Drain(c));  // trainer 1 is still eligible for step 1
  EXPECT_EQ(*c.Join("1", 1, 3), 3);
  std::vector<uint64_t> released;
  auto b = Drain(c, &released);  // steps 1 and 2 close with nobody; the pull waiting for 2 answers
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->contributors.empty());
  EXPECT_EQ(c.version(), 3);
  EXPECT_EQ(released, std::vector<uint64_t>{5});
  ASSERT_TRUE(c.Push("0", 1, 3).ok());  // and step 3 is open for them
}

TEST(ConsistencySyncTest, RaisingTheStartStepOnRejoinLeavesTheCurrentBarrier) {
  auto c = Sync();
  for (auto id : {"0", "1"}) ASSERT_TRUE(c.Join(id, 1, 0).ok());
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  EXPECT_EQ(*c.Join("1", 1, 1), 1);  // trainer 1 agreed with another pserver to start at 1
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, std::vector<std::string>{"0"});
  EXPECT_EQ(*c.Join("1", 1, 0), 1);  // a start step never goes down
}

// Random interleavings of joins, deaths, pushes and pulls, checked against the rules.
TEST(ConsistencySyncTest, RandomInterleavingsKeepTheRules) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    auto c = Sync(1 + seed % 3);
    struct T {
      int64_t epoch = 0;
      int64_t start = 0;
      bool alive = false;
    };
    std::map<std::string, T> trainers;
    std::set<std::string> pushed_this_step;
    std::map<uint64_t, int64_t> pulls;  // ticket -> need
    uint64_t next_ticket = 1;
    int64_t epoch_counter = 0;
    int barriers = 0;
    auto process = [&] {
      auto r = c.TakeReady();
      for (uint64_t t : r.pulls) {
        ASSERT_TRUE(pulls.count(t));
        ASSERT_LE(pulls[t], c.version() + (r.barrier ? 0 : 0));
        pulls.erase(t);
      }
      if (r.barrier) {
        ASSERT_EQ(r.barrier->step, c.version());
        std::set<std::string> contributors(r.barrier->contributors.begin(), r.barrier->contributors.end());
        ASSERT_EQ(contributors, pushed_this_step) << "seed " << seed;
        ASSERT_TRUE(
            std::is_sorted(r.barrier->contributors.begin(), r.barrier->contributors.end(), TrainerIdLess));
        // Every live eligible member had pushed.
        for (auto& [id, t] : trainers) {
          if (t.alive && t.start <= c.version()) {
            ASSERT_TRUE(pushed_this_step.count(id)) << "seed " << seed;
          }
        }
        c.BarrierApplied(r.barrier->step);
        pushed_this_step.clear();
        ++barriers;
        auto after = c.TakeReady();
        for (uint64_t t : after.pulls) {
          ASSERT_LE(pulls.at(t), c.version());
          pulls.erase(t);
        }
      }
    };
    for (int step = 0; step < 400; ++step) {
      int ev = rng() % 10;
      std::string id = std::to_string(rng() % 6);
      T& t = trainers[id];
      if (ev == 0 && !t.alive) {
        t.epoch = ++epoch_counter;
        auto s = c.Join(id, t.epoch, 0);
        ASSERT_TRUE(s.ok());
        ASSERT_GE(*s, c.version());
        t.start = *s;
        t.alive = true;
      } else if (ev == 1 && t.alive && rng() % 3 == 0) {
        c.Leave(id, t.epoch);
        t.alive = false;
      } else if (ev <= 7 && t.alive) {
        auto v = c.Push(id, t.epoch, c.version());
        if (t.start > c.version()) {
          ASSERT_EQ(v.status().code(), StatusCode::kAborted);
        } else if (pushed_this_step.count(id)) {
          ASSERT_EQ(*v, Consistency::PushVerdict::kDuplicate);
        } else {
          ASSERT_EQ(*v, Consistency::PushVerdict::kHold);
          pushed_this_step.insert(id);
        }
      } else if (t.alive) {
        uint64_t ticket = next_ticket++;
        int64_t need = c.version() + rng() % 2;
        auto p = c.Pull(ticket, id, t.epoch, need);
        ASSERT_TRUE(p.ok());
        if (*p) {
          ASSERT_LE(need, c.version());
        } else {
          pulls[ticket] = need;
        }
      }
      process();
      if (HasFatalFailure()) return;
    }
    // Liveness: when every live eligible member pushes, the step completes.
    bool any_alive = false;
    for (auto& [id, t] : trainers) {
      if (t.alive && t.start <= c.version() && !pushed_this_step.count(id)) {
        ASSERT_TRUE(c.Push(id, t.epoch, c.version()).ok());
        pushed_this_step.insert(id);
      }
      any_alive |= t.alive && t.start <= c.version();
    }
    int before = barriers;
    process();
    if (any_alive &&
        (barriers > 0 || static_cast<int>(pushed_this_step.size()) >= 1 + static_cast<int>(seed % 3))) {
      EXPECT_EQ(barriers, before + 1) << "seed " << seed;
    }
  }
}

TEST(ConsistencySyncTest, PiecesAreCheckedLikePushesWithoutCounting) {
  auto c = Sync();
  ASSERT_EQ(*c.Join("0", 1, 0), 0);
  ASSERT_EQ(*c.Join("1", 1, 0), 0);
  EXPECT_FALSE(c.EarlyApplyAllowed());  // the group has not formed yet (no barrier)
  EXPECT_EQ(*c.CheckPiece("0", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_EQ(c.CheckPiece("0", 1, 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.CheckPiece("0", 2, 0).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.CheckPiece("9", 1, 0).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Push("0", 1, 0).ok());
  ASSERT_TRUE(c.Push("1", 1, 0).ok());
  ASSERT_TRUE(Drain(c));
  EXPECT_TRUE(c.EarlyApplyAllowed());
  EXPECT_EQ(*c.CheckPiece("0", 1, 0), Consistency::PushVerdict::kDuplicate);  // a retry of step 0
  EXPECT_EQ(c.CheckPiece("0", 1, 0).ok(), true);
  EXPECT_EQ(c.StepContributors(), (std::vector<std::string>{"0", "1"}));
  // Checking changed nothing: the barrier still waits for both.
  EXPECT_EQ(*c.CheckPiece("1", 1, 1), Consistency::PushVerdict::kHold);
  ASSERT_TRUE(c.Push("0", 1, 1).ok());
  EXPECT_FALSE(Drain(c));
  // A trainer that leaves after its push counted still contributes; one joining once a piece
  // arrived takes part from the next step.
  c.Leave("0", 1);
  EXPECT_EQ(c.StepContributors(), (std::vector<std::string>{"0", "1"}));
  c.PieceArrived();
  EXPECT_EQ(*c.Join("2", 1, 0), 2);
  EXPECT_EQ(c.StepContributors(), (std::vector<std::string>{"0", "1"}));
  ASSERT_TRUE(c.Push("1", 1, 1).ok());
  ASSERT_TRUE(Drain(c));
  EXPECT_EQ(c.StepContributors(), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(*c.Join("3", 1, 0), 2);  // no piece of step 2 yet: the open step
}

TEST(ConsistencySyncTest, NoEarlyApplyWithBackupTrainersOrOutsideSync) {
  Consistency b({ConsistencyMode{}, 1, 1});
  ASSERT_TRUE(b.Join("0", 1, 0).ok());
  ASSERT_TRUE(b.Push("0", 1, 0).ok());
  ASSERT_TRUE(Drain(b));
  EXPECT_FALSE(b.EarlyApplyAllowed());
  auto a = Async();
  EXPECT_FALSE(a.EarlyApplyAllowed());
  ASSERT_TRUE(a.Join("0", 1, 0).ok());
  EXPECT_EQ(a.CheckPiece("0", 1, 0).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ConsistencyAsyncTest, AppliesOnArrivalAndDeduplicatesRetries) {
  auto c = Async();
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kApply);
  EXPECT_EQ(*c.Push("0", 1, 1), Consistency::PushVerdict::kApply);
  EXPECT_EQ(*c.Push("0", 1, 1), Consistency::PushVerdict::kDuplicate);
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kDuplicate);
  EXPECT_EQ(c.version(), 2);
  EXPECT_TRUE(*c.Pull(1, "0", 1, 100));
  EXPECT_TRUE(c.TakeReady().empty());
  EXPECT_EQ(c.Push("x", 1, 0).status().code(), StatusCode::kFailedPrecondition);
}

// Async pieces: each is applied as it arrives, in any order; the push counts once, when its last
// missing piece came; retries of a piece or of a counted push are duplicates; a newer push's
// pieces forget an older unfinished one.
TEST(ConsistencyAsyncTest, PiecesApplyInAnyOrderAndThePushCountsOnceWhenAllArrived) {
  constexpr int kMax = StepPieces::kMaxPieces;
  auto c = Async();
  ASSERT_TRUE(c.Join("0", 1, 0).ok());
  using V = Consistency::PushVerdict;
  EXPECT_EQ(*c.AsyncPiece("0", 1, 0, 2, true), V::kApply);  // the last piece first
  EXPECT_EQ(*c.AsyncPiece("0", 1, 0, 0, false), V::kApply);
  EXPECT_EQ(*c.AsyncPiece("0", 1, 0, 0, false), V::kDuplicate);
  EXPECT_EQ(c.version(), 0);  // piece 1 is still missing
  EXPECT_EQ(*c.AsyncPiece("0", 1, 0, 1, false), V::kApply);
  EXPECT_EQ(c.version(), 1);
  EXPECT_EQ(*c.AsyncPiece("0", 1, 0, 1, false), V::kDuplicate);  // the push counted
  EXPECT_EQ(*c.Push("0", 1, 0), V::kDuplicate);
  // Numbering errors change nothing.
  EXPECT_EQ(*c.AsyncPiece("0", 1, 1, 1, true), V::kApply);
  EXPECT_EQ(c.AsyncPiece("0", 1, 1, 2, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.AsyncPiece("0", 1, 1, 0, true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.AsyncPiece("0", 1, 1, kMax, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.AsyncPiece("0", 1, 1, -1, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.version(), 1);
  // Step 1 is given up (piece 0 never came): step 2's pieces start afresh, step 1's are dropped.
  EXPECT_EQ(*c.AsyncPiece("0", 1, 2, 0, true), V::kApply);
  EXPECT_EQ(c.version(), 2);
  EXPECT_EQ(*c.AsyncPiece("0", 1, 1, 0, false), V::kDuplicate);
  // A trainer that joined again from step 4 (this pserver restarted in its push for step 3).
  ASSERT_TRUE(c.Join("0", 1, 4).ok());
  EXPECT_EQ(*c.AsyncPiece("0", 1, 3, 1, false), V::kDuplicate);
  EXPECT_EQ(*c.AsyncPiece("0", 1, 4, 1, true), V::kApply);
  // Not joined, or outside async.
  EXPECT_EQ(c.AsyncPiece("x", 1, 0, 0, true).status().code(), StatusCode::kFailedPrecondition);
  auto s = Ssp(1);
  ASSERT_TRUE(s.Join("0", 1, 0).ok());
  EXPECT_EQ(s.AsyncPiece("0", 1, 0, 0, true).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ConsistencySspTest, PullWaitsForTheSlowestWithinStaleness) {
  auto c = Ssp(2);
  ASSERT_EQ(*c.Join("fast", 1, 0), 0);
  ASSERT_EQ(*c.Join("slow", 1, 0), 0);
  for (int s = 0; s < 3; ++s) ASSERT_EQ(*c.Push("fast", 1, s), Consistency::PushVerdict::kApply);
  // fast is at clock 3; slow at 0: 3 - 0 > 2, so fast's pull waits.
  EXPECT_FALSE(*c.Pull(7, "fast", 1, 3));
  EXPECT_TRUE(*c.Pull(8, "slow", 1, 0));
  ASSERT_TRUE(c.Push("slow", 1, 0).ok());
  auto r = c.TakeReady();
  EXPECT_EQ(r.pulls, std::vector<uint64_t>{7});
  EXPECT_EQ(c.min_clock(), 1);
}

TEST(ConsistencySspTest, PullsWaitUntilMinTrainersHaveJoined) {
  ConsistencyMode m;
  m.kind = ConsistencyMode::Kind::kSsp;
  m.staleness = 1;
  Consistency c({m, 2});
  ASSERT_TRUE(c.Join("a", 1, 0).ok());
  EXPECT_FALSE(*c.Pull(1, "a", 1, 0));  // alone: the group is still forming
  ASSERT_TRUE(c.Join("b", 1, 0).ok());
  EXPECT_EQ(c.TakeReady().pulls, std::vector<uint64_t>{1});
  c.Leave("b", 1);
  EXPECT_TRUE(*c.Pull(2, "a", 1, 0));  // once formed, departures do not stop it
}

TEST(ConsistencySspTest, SlowestLeavingReleasesPullsAndJoinersStartAtTheMinClock) {
  auto c = Ssp(1);
  ASSERT_TRUE(c.Join("a", 1, 0).ok());
  ASSERT_TRUE(c.Join("b", 1, 0).ok());
  for (int s = 0; s < 4; ++s) ASSERT_TRUE(c.Push("a", 1, s).ok());
  ASSERT_TRUE(c.Push("b", 1, 0).ok());
  EXPECT_FALSE(*c.Pull(1, "a", 1, 4));
  c.Leave("b", 1);
  EXPECT_EQ(c.TakeReady().pulls, std::vector<uint64_t>{1});
  EXPECT_EQ(*c.Join("c", 1, 0), 4);  // starts at the slowest live clock, not at 0
  EXPECT_EQ(c.Push("c", 1, 6).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(*c.Push("c", 1, 3), Consistency::PushVerdict::kDuplicate);
}

TEST(ConsistencySspTest, RandomInterleavingsNeverAnswerBeyondTheBound) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const int S = seed % 4;
    auto c = Ssp(S);
    std::map<std::string, int64_t> clock;  // live members
    std::map<std::string, int64_t> epoch;  // a re-registered trainer gets a new epoch
    int64_t next_epoch = 1;
    std::map<uint64_t, int64_t> waiting;
    uint64_t ticket = 1;
    auto min_clock = [&] {
      int64_t m = INT64_MAX;
      for (auto& [id, cl] : clock) m = std::min(m, cl);
      return m;
    };
    for (int i = 0; i < 300; ++i) {
      std::string id = std::to_string(rng() % 4);
      int ev = rng() % 8;
      if (!clock.count(id)) {
        epoch[id] = next_epoch++;
        auto s = c.Join(id, epoch[id], 0);
        ASSERT_TRUE(s.ok());
        clock[id] = *s;
      } else if (ev == 0) {
        c.Leave(id, epoch[id]);
        clock.erase(id);
      } else if (ev < 5) {
        ASSERT_EQ(*c.Push(id, epoch[id], clock[id]), Consistency::PushVerdict::kApply);
        clock[id]++;
      } else {
        auto p = c.Pull(ticket, id, epoch[id], clock[id]);
        ASSERT_TRUE(p.ok());
        if (*p) {
          ASSERT_GE(min_clock(), clock[id] - S) << "seed " << seed;
        } else {  // waits
          waiting[ticket] = clock[id];
        }
        ++ticket;
      }
      for (uint64_t t : c.TakeReady().pulls) {
        ASSERT_TRUE(clock.empty() || min_clock() >= waiting.at(t) - S) << "seed " << seed;
        waiting.erase(t);
      }
      for (auto& [t, need] : waiting)
        ASSERT_TRUE(!clock.empty() && min_clock() < need - S) << "seed " << seed;
    }
  }
}

// ---- Backup trainers ---------------------------------------------------------------------------

Consistency SyncWithBackups(int b) { return Consistency({ConsistencyMode{}, 1, b}); }

TEST(ConsistencyBackupTest, AStepClosesWithoutTheLastPushAndTheLatePushIsDropped) {
  auto c = SyncWithBackups(1);
  for (const char* id : {"0", "1", "2"}) ASSERT_EQ(*c.Join(id, 1, 0), 0);
  EXPECT_EQ(*c.Push("1", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_FALSE(Drain(c));  // two of three still missing: more than the one backup
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kHold);
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(c.version(), 1);
  // The slow one: its push for the closed step is late, and it goes on from the open step.
  EXPECT_EQ(*c.Push("2", 1, 0), Consistency::PushVerdict::kLate);
  EXPECT_EQ(c.ResumeStep("2"), 1);
  EXPECT_EQ(*c.Push("2", 1, 1), Consistency::PushVerdict::kHold);
  EXPECT_EQ(*c.Push("0", 1, 1), Consistency::PushVerdict::kHold);
  b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"0", "2"}));
  // A retry of a counted push is still a duplicate, not late.
  EXPECT_EQ(*c.Push("0", 1, 1), Consistency::PushVerdict::kDuplicate);
}

TEST(ConsistencyBackupTest, WithoutBackupsALatePushIsRefusedAsBefore) {
  auto c = Sync();
  ASSERT_EQ(*c.Join("0", 1, 0), 0);
  ASSERT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kHold);
  ASSERT_TRUE(Drain(c));
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kDuplicate);
  ASSERT_EQ(*c.Join("1", 1, 0), 1);  // joins the open step 1
  EXPECT_EQ(c.Push("1", 1, 0).status().code(), StatusCode::kAborted);
}

TEST(ConsistencyBackupTest, TheFirstStepWaitsForTheGroupThenClosesWithoutTheBackups) {
  Consistency c({ConsistencyMode{}, 3, 1});
  ASSERT_EQ(*c.Join("0", 1, 0), 0);
  ASSERT_EQ(*c.Join("1", 1, 0), 0);
  EXPECT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_EQ(*c.Push("1", 1, 0), Consistency::PushVerdict::kHold);
  EXPECT_FALSE(Drain(c));  // two members of the three the job waits for
  ASSERT_EQ(*c.Join("2", 1, 0), 0);
  auto b = Drain(c);  // the group formed: all but one pushed
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"0", "1"}));
}

TEST(ConsistencyBackupTest, MoreBackupsThanMembersStillNeedsOnePush) {
  auto c = SyncWithBackups(3);
  ASSERT_EQ(*c.Join("0", 1, 0), 0);
  ASSERT_EQ(*c.Join("1", 1, 0), 0);
  EXPECT_FALSE(Drain(c));  // nobody pushed: no empty step
  EXPECT_EQ(*c.Push("1", 1, 0), Consistency::PushVerdict::kHold);
  auto b = Drain(c);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->contributors, (std::vector<std::string>{"1"}));
}

// ---- Export / restore (a backup replica taking over) ----------------------------------------

TEST(ConsistencyStateTest, ASyncBackupTakesOverWithCountedPushesOnly) {
  auto c = Sync();
  ASSERT_EQ(*c.Join("0", 1, 0), 0);
  ASSERT_EQ(*c.Join("1", 1, 0), 0);
  ASSERT_EQ(*c.Push("0", 1, 0), Consistency::PushVerdict::kHold);
  ASSERT_EQ(*c.Push("1", 1, 0), Consistency::PushVerdict::kHold);
  ASSERT_TRUE(Drain(c));
  ASSERT_EQ(*c.Push("0", 1, 1), Consistency::PushVerdict::kHold);  // held, not counted

  Consistency::State st = c.Export();
  EXPECT_EQ(st.version, 1);
  ASSERT_EQ(st.trainers.size(), 2u);
  EXPECT_EQ(st.trainers[0].last_step, 0);  // trainer 0's held push for step 1 is left out
  EXPECT_EQ(st.trainers[1].last_step, 0);

  Consistency b({ConsistencyMode{}, 1}, st);
  EXPECT_EQ(b.Export(), st);
  EXPECT_EQ(b.members(), (std::vector<std::string>{"0", "1"}));
  // A retry of a counted push is a duplicate; the uncounted one is taken again.
  EXPECT_EQ(*b.Push("1", 1, 0), Consistency::PushVerdict::kDuplicate);
  EXPECT_EQ(*b.Push("0", 1, 1), Consistency::PushVerdict::kHold);
  EXPECT_FALSE(Drain(b));  // both members are still waited for: nobody re-joined to be counted
  EXPECT_EQ(*b.Push("1", 1, 1), Consistency::PushVerdict::kHold);
  auto barrier = Drain(b);
  ASSERT_TRUE(barrier);
  EXPECT_EQ(barrier->contributors, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(b.version(), 2);
}

TEST(ConsistencyStateTest, AnAsyncBackupKnowsEveryAppliedPush) {
  auto c = Async();
  ASSERT_TRUE(c.Join("0", 3, 0).ok());
  ASSERT_EQ(*c.Push("0", 3, 0), Consistency::PushVerdict::kApply);
  ASSERT_EQ(*c.Push("0", 3, 1), Consistency::PushVerdict::kApply);
  ConsistencyMode m;
  m.kind = ConsistencyMode::Kind::kAsync;
  Consistency b({m, 1}, c.Export());
  EXPECT_EQ(b.version(), 2);
  EXPECT_EQ(*b.Push("0", 3, 1), Consistency::PushVerdict::kDuplicate);
  EXPECT_EQ(*b.Push("0", 3, 2), Consistency::PushVerdict::kApply);
  EXPECT_EQ(b.Push("0", 4, 3).status().code(), StatusCode::kFailedPrecondition);  // a newer epoch must join
}

TEST(ConsistencyStateTest, ExportAfterEveryEventRestoresToTheSameState) {
  std::mt19937 rng(7);
  auto c = Sync();
  std::map<std::string, int64_t> next;  // trainer -> the step it pushes next
  for (int i = 0; i < 400; ++i) {
    std::string id = std::to_string(rng() % 3);
    if (!next.count(id)) {
      auto s = c.Join(id, 1, 0);
      ASSERT_TRUE(s.ok());
      next[id] = *s;
    } else {
      auto v = c.Push(id, 1, next[id]);
      if (v.ok())
        ++next[id];
      else if (v.status().code() == StatusCode::kAborted)
        next[id] = c.ResumeStep(id);
    }
    Drain(c);
    Consistency::State st = c.Export();
    EXPECT_EQ(Consistency({ConsistencyMode{}, 1}, st).Export(), st) << "event " << i;
  }
}

}  // namespace
}  // namespace tessera
