// Tests of the sparse-table limit decisions (row_limits.h) and of TableLimits' spec syntax.
#include "pserver/row_limits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "job/wire_convert.h"
#include "tessera/params.h"

namespace tessera {
namespace {

TEST(TableLimitsTest, ParsesPrintsAndRefusesWithTheKeyNamed) {
  auto l = TableLimits::Parse("admit=3, evict_after=1000,budget=64MiB");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->admit_after, 3);
  EXPECT_EQ(l->evict_after, 1000);
  EXPECT_EQ(l->budget_bytes, int64_t{64} << 20);
  EXPECT_TRUE(l->any());
  EXPECT_EQ(*TableLimits::Parse(l->ToString()), *l);
  EXPECT_EQ(TableLimits::Parse("budget=2G")->budget_bytes, int64_t{2} << 30);
  EXPECT_EQ(TableLimits::Parse("budget=4096")->budget_bytes, 4096);
  EXPECT_FLOAT_EQ(TableLimits::Parse("admit_prob=0.25")->admit_prob, 0.25f);
  EXPECT_FALSE(TableLimits::Parse("")->any());
  EXPECT_FALSE(TableLimits::Parse("admit=1")->any());  // the first push admits: no limit
  for (const char* bad : {"admit=x", "admit=256", "admit_prob=0", "admit_prob=1.5", "evict_after=-1",
                          "budget=12XB", "budget=-5", "admit=2,admit_prob=0.5", "budgte=1M", "admit"}) {
    auto r = TableLimits::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("table limits"), std::string::npos) << r.status().message();
  }
  EXPECT_NE(TableLimits::Parse("budgte=1M").status().message().find("'budgte'"), std::string::npos);
}

TEST(TableLimitsTest, WireRoundTripAndRefusal) {
  auto l = *TableLimits::Parse("admit_prob=0.5,evict_after=7,budget=1M");
  EXPECT_EQ(*FromWire(ToWire(l)), l);
  EXPECT_EQ(*FromWire(ToWire(TableLimits{})), TableLimits{});
  wire::TableLimitsSpec bad;
  bad.set_admit_after(300);
  EXPECT_FALSE(FromWire(bad).ok());
  bad.set_admit_after(0);
  bad.set_budget_bytes(-1);
  EXPECT_FALSE(FromWire(bad).ok());
}

TEST(AdmissionSketchTest, NeverCountsUnderTheTruthAndAgesByHalving) {
  AdmissionSketch s;
  std::mt19937_64 rng(3);
  std::map<uint64_t, int> truth;
  // 100k pushes of 20k ids (Zipf-like: small ids far more often), fewer than kAgeEvery.
  for (int i = 0; i < 100000; ++i) {
    uint64_t key = static_cast<uint64_t>(std::pow(20000.0, std::uniform_real_distribution<>(0, 1)(rng)));
    const int t = std::min(255, ++truth[key]);
    const int got = s.Add(key);
    ASSERT_GE(got, t) << "key " << key;
    ASSERT_LE(got, 255);
  }
  // Mostly exact: a 4 x 16384 sketch holds 20k ids with few collisions.
  int exact = 0;
  AdmissionSketch copy;
  ASSERT_TRUE(copy.Load(s.Save()));
  for (const auto& [key, n] : truth) exact += copy.Add(key) == std::min(255, n + 1);
  EXPECT_GT(exact, static_cast<int>(truth.size() * 9 / 10));

  // Aging: after kAgeEvery additions every count is halved.
  AdmissionSketch a;
  for (int i = 0; i < 10; ++i) a.Add(42);
  for (int64_t i = 10; i < AdmissionSketch::kAgeEvery; ++i) a.Add(1000000 + i);
  EXPECT_EQ(a.Add(42), 6);  // 10 halved to 5, plus this one
}

TEST(AdmissionSketchTest, LoadRefusesWhatIsNotASavedSketch) {
  AdmissionSketch s;
  s.Add(1);
  auto bytes = s.Save();
  EXPECT_FALSE(s.Load(std::span<const uint8_t>(bytes.data(), bytes.size() - 1)));
  bytes.back() = 0xff;  // additions past kAgeEvery
  EXPECT_FALSE(s.Load(bytes));
  EXPECT_EQ(s.Add(1), 2);  // unchanged by the refused loads
}

TEST(AdmitByChanceTest, DeterministicWithTheAskedFrequency) {
  int admitted = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const bool a = AdmitByChance(0.2f, 77, static_cast<uint64_t>(i % 5000), i / 5000);
    EXPECT_EQ(a, AdmitByChance(0.2f, 77, static_cast<uint64_t>(i % 5000), i / 5000));
    admitted += a;
  }
  EXPECT_NEAR(admitted / static_cast<double>(n), 0.2, 0.01);
  EXPECT_TRUE(AdmitByChance(1.0f, 1, 2, 3));
  // A repeated id gets new chances at later updates.
  int later = 0;
  for (int u = 0; u < 100; ++u) later += AdmitByChance(0.2f, 77, 12345, u);
  EXPECT_GT(later, 5);
  EXPECT_LT(later, 40);
}

TEST(RowBudgetTest, TheMostRowsThatFit) {
  const RowBytes cost = RowCost(24, true, true);  // dim 8 with adam's two state arrays
  EXPECT_EQ(cost.fixed, 24 * 4 + 24 + 1);
  EXPECT_EQ(RowCost(16, false, false).fixed, 16 * 4 + 8 + 1);  // adagrad, no limits: floats, key, flag
  for (int64_t budget : {int64_t{100}, int64_t{1000}, int64_t{4096}, int64_t{1} << 20, int64_t{64} << 20}) {
    for (int64_t overhead : {int64_t{0}, int64_t{65536}}) {
      const size_t n = RowsWithinBudget(budget, overhead, cost);
      auto bytes = [&](size_t r) {
        return static_cast<int64_t>(r) * cost.fixed + RowBytes::IndexBytes(r) + overhead;
      };
      if (n == 0) {
        EXPECT_GT(bytes(1), budget);
        continue;
      }
      EXPECT_LE(bytes(n), budget) << budget;
      EXPECT_GT(bytes(n + 1), budget) << budget;
    }
  }
  EXPECT_EQ(RowBytes::IndexBytes(0), 0);
  EXPECT_EQ(RowBytes::IndexBytes(7), 7 * 17);   // capacity 7 holds 7 * 7/8 rounded up
  EXPECT_EQ(RowBytes::IndexBytes(8), 15 * 17);  // 8 needs capacity 15
}

// The plain definition RowsToEvict must match.
std::vector<size_t> NaiveEvict(const std::vector<int64_t>& last, int64_t now, int64_t after, size_t max_rows,
                               size_t keep) {
  std::vector<size_t> out, live;
  for (size_t r = 0; r < last.size(); ++r) (after > 0 && now - last[r] > after ? out : live).push_back(r);
  if (max_rows > 0 && live.size() > max_rows && keep < live.size()) {
    std::sort(live.begin(), live.end(),
              [&](size_t a, size_t b) { return last[a] != last[b] ? last[a] < last[b] : a < b; });
    out.insert(out.end(), live.begin(), live.begin() + (live.size() - keep));
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

TEST(RowsToEvictTest, MatchesTheDefinitionOnRandomTables) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = rng() % 40;
    const int64_t now = 50;
    std::vector<int64_t> last(n);
    for (auto& l : last) l = static_cast<int64_t>(rng() % 51);
    const int64_t after = static_cast<int64_t>(rng() % 4 == 0 ? 0 : rng() % 50);
    const size_t max_rows = rng() % 3 == 0 ? 0 : rng() % 40;
    const size_t keep = max_rows * 9 / 10;
    ASSERT_EQ(RowsToEvict(last, now, after, max_rows, keep), NaiveEvict(last, now, after, max_rows, keep))
        << "trial " << trial;
  }
  // Stale rows go; the one pushed at the newest update stays.
  std::vector<int64_t> last = {1, 9, 10, 2};
  EXPECT_EQ(RowsToEvict(last, 10, 5, 0, 0), (std::vector<size_t>{3, 0}));
  // Over the budget: the least recently pushed down to `keep`.
  EXPECT_EQ(RowsToEvict(last, 10, 0, 3, 2), (std::vector<size_t>{3, 0}));
  EXPECT_TRUE(RowsToEvict(last, 10, 0, 4, 2).empty());
}

}  // namespace
}  // namespace tessera
