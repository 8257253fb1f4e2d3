// LoginThrottle: free mistakes, then a doubling wait; early tries do not count; a success clears
// the account; keys forget and stay bounded.
#include "server/login_throttle.h"

#include <gtest/gtest.h>

namespace tessera::server {
namespace {

const std::vector<std::string> kAda = {"user:ada", "addr:10.0.0.7"};

TEST(LoginThrottleTest, FiveFreeMistakesThenADoublingWait) {
  LoginThrottle t;
  int64_t now = 1000000;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(t.WaitMs(kAda, now), 0) << i;
    t.Failed(kAda, now);
  }
  // The fifth failure already costs the first second.
  EXPECT_EQ(t.WaitMs(kAda, now), 1000);
  now += 1000;
  EXPECT_EQ(t.WaitMs(kAda, now), 0);
  t.Failed(kAda, now);
  EXPECT_EQ(t.WaitMs(kAda, now), 2000);
  now += 2000;
  t.Failed(kAda, now);
  EXPECT_EQ(t.WaitMs(kAda, now), 4000);
  EXPECT_EQ(t.Failures("user:ada"), 7);
  // Up to the cap, however many.
  for (int i = 0; i < 40; ++i) t.Failed(kAda, now);
  EXPECT_EQ(t.WaitMs(kAda, now), 300000);
}

TEST(LoginThrottleTest, AnAddressTryingManyAccountsIsSlowedToo) {
  LoginThrottle t;
  for (int i = 0; i < 6; ++i) t.Failed({"user:u" + std::to_string(i), "addr:10.0.0.9"}, 0);
  EXPECT_GT(t.WaitMs({"user:fresh", "addr:10.0.0.9"}, 0), 0) << "a new account from the same address";
  EXPECT_EQ(t.WaitMs({"user:fresh", "addr:10.0.0.10"}, 0), 0) << "another address, another account";
}

TEST(LoginThrottleTest, ASuccessClearsAndOldFailuresAreForgotten) {
  LoginThrottle t;
  for (int i = 0; i < 6; ++i) t.Failed(kAda, 0);
  t.Succeeded(kAda);
  EXPECT_EQ(t.WaitMs(kAda, 0), 0);
  EXPECT_EQ(t.Failures("user:ada"), 0);
  for (int i = 0; i < 6; ++i) t.Failed(kAda, 0);
  const int64_t hour_later = 3600001;
  EXPECT_EQ(t.WaitMs(kAda, hour_later), 0);
  t.Failed(kAda, hour_later);
  EXPECT_EQ(t.Failures("user:ada"), 1) << "counted afresh";
}

TEST(LoginThrottleTest, KeysAreBounded) {
  LoginThrottleOptions o;
  o.max_keys = 100;
  LoginThrottle t(o);
  for (int i = 0; i < 1000; ++i) t.Failed({"addr:" + std::to_string(i)}, i);
  EXPECT_LE(t.size(), 100u);
  EXPECT_EQ(t.Failures("addr:999"), 1) << "the newest kept";
  EXPECT_EQ(t.Failures("addr:0"), 0) << "the stalest dropped";
}

}  // namespace
}  // namespace tessera::server
