// Tests of the scheduler's rules, case by case and as invariants over many random situations.
#include "server_store/scheduler.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera::server {
namespace {

SchedJob Job(const std::string& id, int64_t priority, int64_t submitted, bool running, int trainers, int lo,
             int hi, double cpu = 1, const std::string& ns = "ada") {
  SchedJob j;
  j.id = id;
  j.ns = ns;
  j.priority = priority;
  j.submitted_ms = submitted;
  j.running = running;
  j.trainers = trainers;
  j.min_trainers = lo;
  j.max_trainers = hi;
  j.pservers = 1;
  j.per_process.cpu = cpu;
  j.per_process.memory_mb = 100;
  return j;
}

SchedInput Machine(double cpu) {
  SchedInput in;
  in.capacity.cpu = cpu;
  in.capacity.memory_mb = 1 << 20;
  return in;
}

const Decision* Find(const std::vector<Decision>& ds, const std::string& id) {
  for (const auto& d : ds)
    if (d.id == id) return &d;
  return nullptr;
}

TEST(Scheduler, NothingToDo) { EXPECT_TRUE(Schedule(Machine(4)).empty()); }

TEST(Scheduler, StartsWithAsManyTrainersAsFit) {
  SchedInput in = Machine(4);
  in.jobs.push_back(Job("a", 0, 1, false, 0, 1, 8));
  auto ds = Schedule(in);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].kind, Decision::kStart);
  EXPECT_EQ(ds[0].trainers, 3);  // 1 pserver + 3 trainers = 4 CPUs
}

TEST(Scheduler, WaitsWhenItsMinimumDoesNotFitAndHoldsBackLowerPriority) {
  SchedInput in = Machine(4);
  in.jobs.push_back(Job("run", 5, 1, true, 2, 2, 2));      // 3 CPUs, not elastic
  in.jobs.push_back(Job("big", 3, 2, false, 0, 2, 2));     // needs 3
  in.jobs.push_back(Job("small", 3, 3, false, 0, 0, 0));   // needs 1: fits, but behind "big"
  in.jobs.push_back(Job("urgent", 9, 4, false, 0, 0, 0));  // higher priority: goes first
  auto ds = Schedule(in);
  EXPECT_EQ(Find(ds, "urgent")->kind, Decision::kStart);
  EXPECT_EQ(Find(ds, "big")->kind, Decision::kWait);
  EXPECT_NE(Find(ds, "big")->reason.find("needs 3 CPUs, 0 free"), std::string::npos)
      << Find(ds, "big")->reason;
  EXPECT_EQ(Find(ds, "small")->kind, Decision::kWait);
  EXPECT_NE(Find(ds, "small")->reason.find("behind job big"), std::string::npos);
  EXPECT_EQ(Find(ds, "run"), nullptr);
}

TEST(Scheduler, ShrinksLowerPriorityElasticJobsJustEnough) {
  SchedInput in = Machine(8);
  in.jobs.push_back(Job("low", 0, 1, true, 5, 1, 5));    // 6 CPUs
  in.jobs.push_back(Job("old", 0, 0, true, 1, 1, 1));    // 2 CPUs
  in.jobs.push_back(Job("high", 5, 2, false, 0, 2, 4));  // needs 3 at least
  auto ds = Schedule(in);
  const Decision* low = Find(ds, "low");
  ASSERT_NE(low, nullptr);
  EXPECT_EQ(low->kind, Decision::kResize);
  EXPECT_EQ(low->trainers, 2);  // 3 freed, not more
  EXPECT_EQ(Find(ds, "high")->kind, Decision::kStart);
  EXPECT_EQ(Find(ds, "high")->trainers, 2);
  EXPECT_EQ(Find(ds, "old"), nullptr);
}

TEST(Scheduler, NeverShrinksEqualOrHigherPriorityAndShrinksNothingInVain) {
  SchedInput in = Machine(8);
  in.jobs.push_back(Job("same", 5, 1, true, 3, 1, 3));   // 4 CPUs, same priority: untouchable
  in.jobs.push_back(Job("low", 0, 1, true, 3, 2, 3));    // 4 CPUs, may give 1
  in.jobs.push_back(Job("high", 5, 2, false, 0, 2, 2));  // needs 3
  auto ds = Schedule(in);
  EXPECT_EQ(Find(ds, "same"), nullptr);
  EXPECT_EQ(Find(ds, "low"), nullptr);  // one CPU would not be enough: nothing shrunk
  EXPECT_EQ(Find(ds, "high")->kind, Decision::kWait);
}

TEST(Scheduler, GrowsBackWhenNothingWaits) {
  SchedInput in = Machine(8);
  in.jobs.push_back(Job("low", 0, 1, true, 1, 1, 5));
  in.jobs.push_back(Job("mid", 3, 2, true, 1, 1, 2));
  auto ds = Schedule(in);
  // 4 CPUs used, 4 free: the higher priority grows first (to its maximum), then the other.
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].id, "mid");
  EXPECT_EQ(ds[0].trainers, 2);
  EXPECT_EQ(ds[1].id, "low");
  EXPECT_EQ(ds[1].trainers, 4);
}

TEST(Scheduler, DoesNotGrowWhileAJobWaitsForResources) {
  SchedInput in = Machine(4);
  in.jobs.push_back(Job("run", 0, 1, true, 1, 1, 3));   // 2 CPUs
  in.jobs.push_back(Job("big", 0, 2, false, 0, 3, 3));  // needs 4: waits (same priority: no shrink)
  auto ds = Schedule(in);
  EXPECT_EQ(Find(ds, "big")->kind, Decision::kWait);
  EXPECT_EQ(Find(ds, "run"), nullptr);
}

TEST(Scheduler, QuotaHoldsAJobButNotOtherNamespaces) {
  SchedInput in = Machine(16);
  in.quotas["ada"].jobs = 1;
  in.jobs.push_back(Job("a1", 0, 1, true, 1, 1, 1, 1, "ada"));
  in.jobs.push_back(Job("a2", 9, 2, false, 0, 1, 1, 1, "ada"));
  in.jobs.push_back(Job("b1", 0, 3, false, 0, 1, 1, 1, "bob"));
  auto ds = Schedule(in);
  EXPECT_EQ(Find(ds, "a2")->kind, Decision::kWait);
  EXPECT_NE(Find(ds, "a2")->reason.find("2 concurrent jobs (quota 1)"), std::string::npos)
      << Find(ds, "a2")->reason;
  EXPECT_EQ(Find(ds, "b1")->kind, Decision::kStart);
}

TEST(Scheduler, QuotaCapsTrainersAndResources) {
  SchedInput in = Machine(64);
  in.quotas["ada"].trainers = 2;
  in.quotas["bob"].cpu = 3.5;
  in.jobs.push_back(Job("a", 0, 1, false, 0, 1, 8, 1, "ada"));
  in.jobs.push_back(Job("b", 0, 2, false, 0, 1, 8, 1, "bob"));
  auto ds = Schedule(in);
  EXPECT_EQ(Find(ds, "a")->trainers, 2);
  EXPECT_EQ(Find(ds, "b")->trainers, 2);  // 1 pserver + 2 trainers = 3 CPUs <= 3.5
}

TEST(Scheduler, OrderIsPriorityThenSubmission) {
  SchedInput in = Machine(2);
  in.jobs.push_back(Job("late", 1, 9, false, 0, 1, 1));
  in.jobs.push_back(Job("early", 1, 2, false, 0, 1, 1));
  auto ds = Schedule(in);
  EXPECT_EQ(Find(ds, "early")->kind, Decision::kStart);
  EXPECT_EQ(Find(ds, "late")->kind, Decision::kWait);
}

// Invariants over random situations: decisions keep every job within its bounds, the machine
// within its capacity and every namespace within its quota (when they were before), shrink only
// for a higher-priority start, and never start a job whose minimum does not fit.
TEST(Scheduler, InvariantsHoldOnRandomSituations) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 3000; ++round) {
    SchedInput in = Machine(pick(2, 24));
    const std::vector<std::string> nss = {"a", "b", "c"};
    for (const auto& ns : nss)
      if (pick(0, 2) == 0) in.quotas[ns].cpu = pick(2, 12);
    double used = 0;
    std::map<std::string, double> ns_cpu;
    int n = pick(0, 8);
    for (int i = 0; i < n; ++i) {
      int lo = pick(0, 3), hi = lo + pick(0, 4);
      const std::string ns = nss[pick(0, 2)];
      SchedJob j =
          Job("j" + std::to_string(i), pick(0, 3), pick(0, 100), pick(0, 1) == 1, 0, lo, hi, pick(1, 2), ns);
      if (j.running) {
        j.trainers = pick(lo, hi);
        double c = (j.pservers + j.trainers) * j.per_process.cpu;
        auto q = in.quotas.find(ns);
        if (used + c > in.capacity.cpu || (q != in.quotas.end() && ns_cpu[ns] + c > *q->second.cpu)) continue;
        used += c;
        ns_cpu[ns] += c;
      }
      in.jobs.push_back(j);
    }
    auto ds = Schedule(in);
    std::map<std::string, SchedJob> after;
    for (const auto& j : in.jobs) after[j.id] = j;
    int64_t top_started = -1;
    for (const auto& d : ds) {
      SchedJob& j = after[d.id];
      if (d.kind == Decision::kStart) {
        ASSERT_FALSE(j.running) << round;
        j.running = true;
        j.trainers = d.trainers;
        top_started = std::max(top_started, j.priority);
      } else if (d.kind == Decision::kResize) {
        ASSERT_TRUE(j.running) << round;
        if (d.trainers < j.trainers) {
          bool for_higher = false;
          for (const auto& s : ds)
            for_higher = for_higher || (s.kind == Decision::kStart && after[s.id].priority > j.priority);
          ASSERT_TRUE(for_higher) << round << ": " << d.id << " shrunk with no higher-priority start";
        }
        j.trainers = d.trainers;
      }
    }
    double total = 0;
    std::map<std::string, double> by_ns;
    for (const auto& [id, j] : after) {
      if (!j.running) continue;
      ASSERT_GE(j.trainers, j.min_trainers) << round << " " << id;
      ASSERT_LE(j.trainers, j.max_trainers) << round << " " << id;
      total += (j.pservers + j.trainers) * j.per_process.cpu;
      by_ns[j.ns] += (j.pservers + j.trainers) * j.per_process.cpu;
    }
    ASSERT_LE(total, in.capacity.cpu + 1e-9) << round;
    for (const auto& [ns, c] : by_ns)
      if (in.quotas.count(ns) && in.quotas[ns].cpu)
        ASSERT_LE(c, *in.quotas[ns].cpu + 1e-9) << round << " " << ns;
  }
}

TEST(Scheduler, OverQuotaAndShortNameWhatIsExceeded) {
  QuotaLimits q;
  q.gpus = 0;
  Usage u;
  u.resources.gpus = 2;
  EXPECT_EQ(OverQuota(u, q), "2 GPUs (quota 0)");
  EXPECT_EQ(OverQuota(Usage{}, q), "");
  Resources need{4, 0, 0}, free{1.5, 0, 0};
  EXPECT_EQ(Short(need, free), "needs 4 CPUs, 1.5 free");
}

}  // namespace
}  // namespace tessera::server
