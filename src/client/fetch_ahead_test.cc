// FetchAheadRule: when the reader fetches its next task ahead.
#include "client/fetch_ahead.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(FetchAheadRuleTest, AtTheFloorWhateverTheTiming) {
  FetchAheadRule rule(256);
  EXPECT_FALSE(rule.Now(257, 0, 0));  // nothing measured yet: the floor decides
  EXPECT_TRUE(rule.Now(256, 0, 0));
  EXPECT_TRUE(rule.Now(0, 5000, 1.0));
  rule.Fetched(0.001);  // a fast fetch: the floor still holds
  EXPECT_TRUE(rule.Now(200, 5000, 0.1));
}

TEST(FetchAheadRuleTest, EarlierWhenTheLastFetchTookLongerThanTheRecordsLeftLast) {
  FetchAheadRule rule(256);
  rule.Fetched(0.009);  // 9 ms
  // 64,000 records/s: 9 ms x 3 is about 1,728 records.
  EXPECT_TRUE(rule.Now(1720, 6400, 0.1));
  EXPECT_FALSE(rule.Now(1800, 6400, 0.1));
  // A slow model (640 records/s) waits for the floor.
  EXPECT_FALSE(rule.Now(300, 64, 0.1));
  EXPECT_TRUE(rule.Now(256, 64, 0.1));
  // A fetch slower than a whole task: at once.
  rule.Fetched(10);
  EXPECT_TRUE(rule.Now(5000, 64, 0.01));
}

TEST(FetchAheadRuleTest, TheRateIsTrustedOnlyAfterSomeRecords) {
  FetchAheadRule rule(256);
  rule.Fetched(1);
  EXPECT_FALSE(rule.Now(1000, FetchAheadRule::kRateAfterRecords - 1, 0.0001));
  EXPECT_TRUE(rule.Now(1000, FetchAheadRule::kRateAfterRecords, 0.1));
  EXPECT_FALSE(rule.Now(1000, 1000, 0));  // no time measured: no rate
}

TEST(FetchAheadRuleTest, AFloorOfZeroNeverFetchesAhead) {
  FetchAheadRule rule(0);
  rule.Fetched(10);
  EXPECT_FALSE(rule.Now(0, 1000, 0.01));
  EXPECT_FALSE(rule.Now(100, 1000, 0.01));
  EXPECT_FALSE(FetchAheadRule(-1).Now(0, 0, 0));
}

}  // namespace
}  // namespace tessera
