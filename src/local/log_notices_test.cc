// LogNotices: the marked lines of a log, found across pieces, each shown at most once a minute.
#include "local/log_notices.h"

#include <gtest/gtest.h>

#include "common/logging.h"

namespace tessera::local {
namespace {

const std::string kMark = kNoticeMark;

TEST(LogNoticesTest, OnlyMarkedLinesAreNoticesWhereverTheLogIsCut) {
  const std::string log =
      "2026-11-27 10:00:00.000 I [job=j node=pserver-0] serving index 0\n"
      "2026-11-27 10:00:01.000 E [job=j node=pserver-0] " +
      kMark +
      "pserver 0: checkpoint of version 40 failed: No space left on device\n"
      "a trainer's own print with notice in it\n";
  for (size_t cut = 0; cut <= log.size(); ++cut) {
    LogNotices n;
    const TimePoint t{};
    auto a = n.Feed(std::string_view(log).substr(0, cut), t);
    auto b = n.Feed(std::string_view(log).substr(cut), t);
    a.insert(a.end(), b.begin(), b.end());
    ASSERT_EQ(a.size(), 1u) << "cut at " << cut;
    EXPECT_EQ(a[0], "pserver 0: checkpoint of version 40 failed: No space left on device");
  }
}

TEST(LogNoticesTest, AnUnfinishedLineWaitsForItsEnd) {
  LogNotices n;
  EXPECT_TRUE(n.Feed("x " + kMark + "half", TimePoint{}).empty());
  auto done = n.Feed(" and the rest\n", TimePoint{});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], "half and the rest");
}

TEST(LogNoticesTest, TheSameNoticeWithOtherNumbersIsShownOnceAMinute) {
  LogNotices n;
  const TimePoint t0{};
  auto line = [&](int v) { return kMark + "checkpoint of version " + std::to_string(v) + " failed\n"; };
  EXPECT_EQ(n.Feed(line(10), t0).size(), 1u);
  EXPECT_TRUE(n.Feed(line(20), t0 + std::chrono::seconds(30)).empty());
  EXPECT_EQ(n.Feed(kMark + "another notice\n", t0 + std::chrono::seconds(31)).size(), 1u);
  EXPECT_EQ(n.Feed(line(30), t0 + std::chrono::seconds(61)).size(), 1u);
}

TEST(LogNoticesTest, ALineLongerThanTheLimitIsSkippedAndTheNextOneRead) {
  LogNotices n;
  const std::string huge(LogNotices::kMaxLine + 10, 'x');
  EXPECT_TRUE(n.Feed(kMark + huge.substr(0, 100), TimePoint{}).empty());
  EXPECT_TRUE(n.Feed(huge, TimePoint{}).empty());
  auto after = n.Feed("\n" + kMark + "short\n", TimePoint{});
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0], "short");
}

}  // namespace
}  // namespace tessera::local
