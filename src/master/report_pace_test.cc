// The report pace: the master's load from reports stays flat as the job grows.
#include "master/report_pace.h"

#include <gtest/gtest.h>

namespace tessera::master {
namespace {

using std::chrono::milliseconds;

// Reports a second the master receives from `n` trainers at the pace it gives them.
double PerSecond(int64_t n, milliseconds every) { return static_cast<double>(n) * 1000.0 / every.count(); }

TEST(ReportPaceTest, SmallJobsKeepTheirPace) {
  for (int64_t n : {0, 1, 2, 10, 12}) {
    EXPECT_EQ(PaceFor(n, false).progress, milliseconds(1000)) << n;
    EXPECT_EQ(PaceFor(n, false).task_progress, milliseconds(250)) << n;
    EXPECT_EQ(PaceFor(n, true).task_progress, milliseconds(25)) << n;
  }
  EXPECT_EQ(PaceFor(50, false).progress, milliseconds(1000));
}

TEST(ReportPaceTest, LargeJobsSendAboutTheSameNumberASecond) {
  for (int64_t n : {100, 300, 1000, 10000}) {
    EXPECT_NEAR(PerSecond(n, PaceFor(n, false).progress), 50, 1) << n;
    EXPECT_NEAR(PerSecond(n, PaceFor(n, false).task_progress), 50, 1) << n;
    EXPECT_NEAR(PerSecond(n, PaceFor(n, true).task_progress), 500, 10) << n;
  }
  EXPECT_EQ(PaceFor(1000, false).progress, milliseconds(20000));
  EXPECT_EQ(PaceFor(1000, true).task_progress, milliseconds(2000));
}

TEST(ReportPaceTest, NeverSlowerForFewerTrainers) {
  for (bool tail : {false, true})
    for (int64_t n = 1; n < 5000; n += 7) {
      EXPECT_LE(PaceFor(n, tail).progress, PaceFor(n + 7, tail).progress);
      EXPECT_LE(PaceFor(n, tail).task_progress, PaceFor(n + 7, tail).task_progress);
    }
}

}  // namespace
}  // namespace tessera::master
