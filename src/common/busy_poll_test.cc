// HostBusyPoll and BusyPollFromEnvironment: polling only where every busy process has a core, unless the
// user chose; the variable's value checked.
#include "common/busy_poll.h"

#include <gtest/gtest.h>

#include <map>

#include "common/fake_getenv.h"

namespace tessera {
namespace {

TEST(BusyPollTest, OnOnlyWhereEveryProcessHasACoreUnlessTheUserChose) {
  EXPECT_EQ(HostBusyPoll(-1, 2, 2, FakeGetenv({})), kBusyPollMicros)
      << "a trainer and a pserver on two cores";
  EXPECT_EQ(HostBusyPoll(-1, 4, 2, FakeGetenv({})), kBusyPollMicros);
  EXPECT_EQ(HostBusyPoll(-1, 1, 1, FakeGetenv({})), kBusyPollMicros);
  EXPECT_EQ(HostBusyPoll(-1, 2, 3, FakeGetenv({})), 0) << "three busy processes on two cores";
  EXPECT_EQ(HostBusyPoll(-1, 2, 4, FakeGetenv({})), 0);
  EXPECT_EQ(HostBusyPoll(-1, 64, 9, FakeGetenv({})), kBusyPollMicros);
  EXPECT_EQ(HostBusyPoll(-1, 0, 1, FakeGetenv({})), 0) << "cores unknown: never poll";
  EXPECT_EQ(HostBusyPoll(-1, 8, 0, FakeGetenv({})), std::nullopt) << "processes unknown: leave it";
  EXPECT_EQ(HostBusyPoll(-1, 8, 2, FakeGetenv({{"TESSERA_BUSY_POLL_US", "0"}})), std::nullopt)
      << "the user's variable is left alone";
  EXPECT_EQ(HostBusyPoll(-1, 8, 2, FakeGetenv({{"TESSERA_BUSY_POLL_US", ""}})), std::nullopt);
  EXPECT_EQ(HostBusyPoll(250, 2, 4, FakeGetenv({{"TESSERA_BUSY_POLL_US", "0"}})), 250) << "the flag wins";
  EXPECT_EQ(HostBusyPoll(0, 8, 2, FakeGetenv({})), 0);
}

TEST(BusyPollTest, TheVariableIsAWholeNumberOfMicrosecondsInRange) {
  EXPECT_EQ(*BusyPollFromEnvironment(FakeGetenv({})), std::chrono::microseconds(0));
  EXPECT_EQ(*BusyPollFromEnvironment(FakeGetenv({{"TESSERA_BUSY_POLL_US", "0"}})),
            std::chrono::microseconds(0));
  EXPECT_EQ(*BusyPollFromEnvironment(FakeGetenv({{"TESSERA_BUSY_POLL_US", "1000"}})),
            std::chrono::microseconds(1000));
  EXPECT_EQ(*BusyPollFromEnvironment(FakeGetenv({{"TESSERA_BUSY_POLL_US", "100000"}})),
            std::chrono::microseconds(100000));
  for (const char* bad : {"-1", "1e3", "100001", "12345678901234", " 5", "5us", "abc"}) {
    auto p = BusyPollFromEnvironment(FakeGetenv({{"TESSERA_BUSY_POLL_US", bad}}));
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("TESSERA_BUSY_POLL_US='" + std::string(bad) + "'"), std::string::npos)
        << p.status().message();
  }
}

}  // namespace
}  // namespace tessera
