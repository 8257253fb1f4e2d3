// ExportCuts: when a cut is taken (now, at a later version, never once its version went by),
// what asking again says, and how cuts are dropped (release, idle time, the number kept).
#include "pserver/export_cuts.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera {
namespace {

using Cuts = ExportCuts<int>;
using Action = Cuts::Action;
using State = Cuts::State;

TEST(ExportCutsTest, ACutAtTheCurrentVersionIsTakenAtOnce) {
  Cuts c;
  EXPECT_EQ(c.Ask(7, 10, 10, 0), Action::kTake);
  EXPECT_EQ(c.state(7), State::kPending);
  EXPECT_EQ(c.Get(7, 0), nullptr);  // not put yet
  c.Put(7, std::make_shared<int>(10));
  EXPECT_EQ(c.state(7), State::kReady);
  ASSERT_NE(c.Get(7, 1), nullptr);
  EXPECT_EQ(*c.Get(7, 1), 10);
  EXPECT_EQ(c.Ask(7, 10, 12, 2), Action::kReady);  // asked again later: still the copy of 10
  EXPECT_FALSE(c.any_pending());
}

TEST(ExportCutsTest, NowMeansTheCurrentVersion) {
  Cuts c;
  EXPECT_EQ(c.Ask(1, -1, 4, 0), Action::kTake);
  EXPECT_EQ(c.VersionReached(4), std::vector<uint64_t>{1});
}

TEST(ExportCutsTest, AFutureCutWaitsForItsVersionAndAPastOneIsRefused) {
  Cuts c;
  EXPECT_EQ(c.Ask(1, 12, 10, 0), Action::kWait);
  EXPECT_EQ(c.Ask(2, 9, 10, 0), Action::kPassed);
  EXPECT_EQ(c.state(2), State::kPassed);
  EXPECT_TRUE(c.any_pending());
  EXPECT_TRUE(c.VersionReached(11).empty());
  EXPECT_EQ(c.Ask(1, 12, 11, 1), Action::kWait);
  EXPECT_EQ(c.VersionReached(12), std::vector<uint64_t>{1});
  c.Put(1, std::make_shared<int>(12));
  EXPECT_EQ(c.Ask(1, 12, 13, 2), Action::kReady);
  EXPECT_EQ(c.Ask(2, 9, 13, 2), Action::kPassed);  // stays refused
}

TEST(ExportCutsTest, AVersionThatWentByWithoutACopyPassesTheCut) {
  Cuts c;
  EXPECT_EQ(c.Ask(1, 12, 10, 0), Action::kWait);
  EXPECT_EQ(c.Ask(2, 14, 10, 0), Action::kWait);
  // The version jumped (a restore): 12 never came.
  EXPECT_TRUE(c.VersionReached(13).empty());
  EXPECT_EQ(c.state(1), State::kPassed);
  EXPECT_EQ(c.state(2), State::kPending);
  // Asking sees it too, even before any VersionReached.
  Cuts d;
  EXPECT_EQ(d.Ask(1, 12, 10, 0), Action::kWait);
  EXPECT_EQ(d.Ask(1, 12, 13, 0), Action::kPassed);
}

TEST(ExportCutsTest, CutsDueAtOneVersionAreTakenTogether) {
  Cuts c({.max_cuts = 4, .idle_ms = 1000});
  c.Ask(3, 5, 1, 0);
  c.Ask(1, 5, 1, 0);
  c.Ask(2, 6, 1, 0);
  EXPECT_EQ(c.VersionReached(5), (std::vector<uint64_t>{1, 3}));
  auto copy = std::make_shared<int>(5);
  c.Put(1, copy);
  c.Put(3, copy);
  EXPECT_EQ(c.Get(1, 1), c.Get(3, 1));
  EXPECT_EQ(c.state(2), State::kPending);
}

TEST(ExportCutsTest, TheFirstTargetHoldsWhenAskedAgainWithAnother) {
  Cuts c;
  EXPECT_EQ(c.Ask(1, 8, 5, 0), Action::kWait);
  EXPECT_EQ(c.Ask(1, 5, 5, 0), Action::kWait);  // not taken at 5: the cut is for 8
  EXPECT_TRUE(c.VersionReached(5).empty());
}

TEST(ExportCutsTest, ReleasedCutsAreGoneAndAPutAfterReleaseIsIgnored) {
  Cuts c;
  c.Ask(1, 5, 5, 0);
  EXPECT_TRUE(c.Release(1));
  EXPECT_FALSE(c.Release(1));
  c.Put(1, std::make_shared<int>(5));
  EXPECT_EQ(c.Get(1, 0), nullptr);
  EXPECT_EQ(c.state(1), State::kUnknown);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.dropped(), 0);
}

TEST(ExportCutsTest, ACutUnusedForTheIdleTimeIsDroppedAndReadingKeepsItAlive) {
  Cuts c({.max_cuts = 2, .idle_ms = 100});
  c.Ask(1, 5, 5, 0);
  c.Put(1, std::make_shared<int>(5));
  EXPECT_NE(c.Get(1, 99), nullptr);   // used at 99
  EXPECT_NE(c.Get(1, 198), nullptr);  // 99 ms later: kept, used again
  EXPECT_EQ(c.Get(1, 298), nullptr);  // 100 ms unused: gone
  EXPECT_EQ(c.state(1), State::kUnknown);
  EXPECT_EQ(c.dropped(), 1);
  // Pending ones expire too (an exporter that died before its version came).
  c.Ask(2, 50, 5, 300);
  EXPECT_EQ(c.Expire(399), 0u);
  EXPECT_EQ(c.Expire(400), 1u);
  EXPECT_FALSE(c.any_pending());
}

TEST(ExportCutsTest, ANewCutBeyondTheLimitDropsTheLeastRecentlyUsed) {
  Cuts c({.max_cuts = 2, .idle_ms = 1000});
  c.Ask(1, 5, 5, 0);
  c.Put(1, std::make_shared<int>(1));
  c.Ask(2, 5, 5, 10);
  c.Put(2, std::make_shared<int>(2));
  EXPECT_NE(c.Get(1, 20), nullptr);  // 1 is now the more recent
  c.Ask(3, 5, 5, 30);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.state(2), State::kUnknown);
  EXPECT_EQ(c.state(1), State::kReady);
  EXPECT_EQ(c.dropped(), 1);
}

// Random asks, versions, puts, releases and reads: every taken cut holds the version it was
// asked at, a cut is ready only if that version came, and no more than max_cuts are held.
TEST(ExportCutsTest, RandomHistoriesKeepEveryCutAtItsVersion) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Cuts c({.max_cuts = 3, .idle_ms = 50});
    int64_t version = 0, now = 0;
    std::map<uint64_t, int64_t> target;
    for (int i = 0; i < 2000; ++i) {
      now += rng() % 5;
      const uint64_t id = 1 + rng() % 6;
      switch (rng() % 5) {
        case 0: {  // ask
          const int64_t t = rng() % 4 == 0 ? -1 : version - 1 + static_cast<int64_t>(rng() % 4);
          c.Expire(now);  // as Ask does first
          if (c.state(id) == State::kUnknown) target[id] = t < 0 ? version : t;
          Action a = c.Ask(id, t, version, now);
          if (a == Action::kTake) {
            ASSERT_EQ(target[id], version);
            for (uint64_t x : c.VersionReached(version)) c.Put(x, std::make_shared<int>(version));
          }
          if (a == Action::kWait) {
            ASSERT_GT(target[id], version);
          }
          if (a == Action::kPassed) {
            ASSERT_LT(target[id], version);
          }
          break;
        }
        case 1:  // a barrier
          ++version;
          for (uint64_t x : c.VersionReached(version)) {
            ASSERT_EQ(target[x], version);
            c.Put(x, std::make_shared<int>(version));
          }
          break;
        case 2:
          c.Release(id);
          break;
        default:
          if (auto cut = c.Get(id, now)) {
            ASSERT_EQ(*cut, target[id]) << "seed " << seed;
          }
      }
      ASSERT_LE(c.size(), 3u);
      ASSERT_FALSE(c.state(id) == State::kReady && target[id] > version);
    }
  }
}

}  // namespace
}  // namespace tessera
