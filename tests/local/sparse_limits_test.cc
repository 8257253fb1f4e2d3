// A sparse table's memory budget under `tessera local`: logreg over a click log with far more
// feature ids than the budget holds keeps its pserver's memory bounded and loses little AUC.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

#include "local/local_fixture.h"

namespace tessera::testing {
namespace {

struct PserverEnd {
  double peak_mib = 0;
  int64_t rows = 0;
  double table_mib = 0;
  int64_t admitted = 0, evicted = 0;
};

// The pserver's last words: "stopped; peak resident memory 54.2 MiB; table weights: 216954 rows
// in 11.7 MiB (1616172 admitted, 1399218 evicted)".
PserverEnd ParsePserverEnd(const std::string& log) {
  PserverEnd e;
  std::smatch m;
  auto mib = [](const std::string& n, const std::string& unit) {
    double v = std::stod(n);
    return unit == "GiB" ? v * 1024 : unit == "KiB" ? v / 1024 : unit == "B" ? v / 1048576 : v;
  };
  std::regex re(
      R"(stopped; peak resident memory ([0-9.]+) (\w+); table weights: ([0-9]+) rows in ([0-9.]+) (\w+)(?: \(([0-9]+) admitted, ([0-9]+) evicted\))?)");
  if (!std::regex_search(log, m, re)) return e;
  e.peak_mib = mib(m[1], m[2]);
  e.rows = std::stoll(m[3]);
  e.table_mib = mib(m[4], m[5]);
  if (m[6].matched) {
    e.admitted = std::stoll(m[6]);
    e.evicted = std::stoll(m[7]);
  }
  return e;
}

TEST_F(LocalTest, ATableBudgetBoundsPserverMemoryAndKeepsTheAuc) {
  // 300k rows of 20 ids from 3M (Zipf 1.1): about 670k distinct ids, a 36 MiB table unbounded.
  UploadCtr({"--rows", "300000", "--features", "3000000"});
  ASSERT_FALSE(HasFailure());
  auto train = [&](const std::string& name, std::vector<std::string> extra) {
    run_name_ = name;
    std::vector<std::string> args = {"--dataset",      "ctr",
                                     "--eval-dataset", "ctr-eval",
                                     "--model",        "logreg",
                                     "--passes",       "2",
                                     "--optimizer",    "ftrl:alpha=0.1,beta=0.01,l1=0.0003",
                                     "--job",          name};
    args.insert(args.end(), extra.begin(), extra.end());
    Subprocess& p = StartLocal(args);
    auto code = p.Wait(std::chrono::seconds(300));
    EXPECT_TRUE(code.has_value() && *code == 0) << p.Output() << LogsTail();
    auto log = ReadFile(run() + "/logs/pserver-0.log");
    EXPECT_TRUE(log.ok());
    PserverEnd e = ParsePserverEnd(log.ok() ? *log : "");
    EXPECT_GT(e.peak_mib, 0) << "no memory summary in the pserver's log: " << (log.ok() ? *log : "");
    return std::make_pair(Result()["metrics"]["auc"].get<double>(), e);
  };
  const auto [auc_all, all] = train("unbounded", {});
  const auto [auc_budget, budget] = train("budget", {"--model-arg", "budget_mib=16"});
  run_name_ = "run";
  std::printf("[ budget ] unbounded: AUC %.4f, %lld rows in %.1f MiB, peak RSS %.1f MiB\n", auc_all,
              static_cast<long long>(all.rows), all.table_mib, all.peak_mib);
  std::printf(
      "[ budget ] 16 MiB:    AUC %.4f, %lld rows in %.1f MiB, peak RSS %.1f MiB (%lld admitted, %lld "
      "evicted)\n",
      auc_budget, static_cast<long long>(budget.rows), budget.table_mib, budget.peak_mib,
      static_cast<long long>(budget.admitted), static_cast<long long>(budget.evicted));
  EXPECT_GT(all.table_mib, 30) << "the stream must go well past the budget";
  EXPECT_LE(budget.table_mib, 16.0);
  EXPECT_GT(budget.evicted, 100000);
  EXPECT_EQ(budget.admitted - budget.evicted, budget.rows);
  // The process's own memory (code, gRPC, transport buffers, the trainer's requests) is about
  // 38 MiB here; the stated margin over the budget is 48 MiB.
  EXPECT_LE(budget.peak_mib, 16.0 + 48.0);
  EXPECT_LT(budget.peak_mib + 10, all.peak_mib);
  EXPECT_NEAR(auc_budget, auc_all, 0.005);
}

}  // namespace
}  // namespace tessera::testing
