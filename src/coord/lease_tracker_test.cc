#include "coord/lease_tracker.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LeaseTrackerTest, AliveUntilGrantSendTimePlusTtl) {
  TimePoint t0{};
  LeaseTracker t(t0, seconds(2));
  EXPECT_EQ(t.StateAt(t0), LeaseState::kAlive);
  EXPECT_EQ(t.StateAt(t0 + milliseconds(1999)), LeaseState::kAlive);
  EXPECT_EQ(t.StateAt(t0 + seconds(2)), LeaseState::kUnconfirmed);
}

TEST(LeaseTrackerTest, RenewalCountsFromSendTimeNotAnswerTime) {
  TimePoint t0{};
  LeaseTracker t(t0, seconds(2));
  // Sent at 1.5 s, answered much later: still alive only until 3.5 s.
  t.OnKeepAliveAnswered(t0 + milliseconds(1500), seconds(2));
  EXPECT_EQ(t.StateAt(t0 + milliseconds(3499)), LeaseState::kAlive);
  EXPECT_EQ(t.StateAt(t0 + milliseconds(3500)), LeaseState::kUnconfirmed);
}

TEST(LeaseTrackerTest, OutOfOrderAnswersNeverShortenTheLease) {
  TimePoint t0{};
  LeaseTracker t(t0, seconds(2));
  t.OnKeepAliveAnswered(t0 + seconds(3), seconds(2));
  t.OnKeepAliveAnswered(t0 + seconds(1), seconds(2));
  EXPECT_EQ(t.expiry(), t0 + seconds(5));
}

TEST(LeaseTrackerTest, UnconfirmedRecoversWhenRenewed) {
  TimePoint t0{};
  LeaseTracker t(t0, seconds(2));
  EXPECT_EQ(t.StateAt(t0 + seconds(5)), LeaseState::kUnconfirmed);
  // etcd restarted and extended the lease; our next keep-alive is answered.
  t.OnKeepAliveAnswered(t0 + seconds(5), seconds(2));
  EXPECT_EQ(t.StateAt(t0 + seconds(5)), LeaseState::kAlive);
}

TEST(LeaseTrackerTest, ZeroTtlAnswerMeansLostForever) {
  TimePoint t0{};
  LeaseTracker t(t0, seconds(10));
  t.OnKeepAliveAnswered(t0 + seconds(1), seconds(0));
  EXPECT_EQ(t.StateAt(t0 + seconds(1)), LeaseState::kLost);
  t.OnKeepAliveAnswered(t0 + seconds(2), seconds(10));
  EXPECT_EQ(t.StateAt(t0 + seconds(2)), LeaseState::kLost);
}

TEST(LeaseTrackerTest, ExplicitLoss) {
  LeaseTracker t(TimePoint{}, seconds(10));
  t.OnLost();
  EXPECT_EQ(t.StateAt(TimePoint{}), LeaseState::kLost);
}

TEST(LeaseTrackerTest, WakesForTheExpiryOnlyWhileItIsAhead) {
  TimePoint t0{};
  LeaseTracker t(t0, seconds(10));
  // Ahead and before the plan: wake then, to report it.
  EXPECT_EQ(t.WakeAt(t0 + seconds(12), t0 + seconds(9)), t0 + seconds(10));
  // After the plan: the plan.
  EXPECT_EQ(t.WakeAt(t0 + seconds(3), t0 + seconds(1)), t0 + seconds(3));
  // Judged already (at the expiry or after): the plan, not a time that has passed.
  EXPECT_EQ(t.WakeAt(t0 + seconds(12), t0 + seconds(10)), t0 + seconds(12));
  EXPECT_EQ(t.WakeAt(t0 + seconds(12), t0 + seconds(11)), t0 + seconds(12));
  // Renewed: the new expiry wakes it again.
  t.OnKeepAliveAnswered(t0 + seconds(11), seconds(10));
  EXPECT_EQ(t.WakeAt(t0 + seconds(30), t0 + seconds(11)), t0 + seconds(21));
}

}  // namespace
}  // namespace tessera
