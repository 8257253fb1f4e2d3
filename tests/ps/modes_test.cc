// SSP and async end to end with trainer processes of different speeds.
#include <gtest/gtest.h>

#include <sstream>

#include "linear_data.h"
#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

struct TrainerRun {
  std::unique_ptr<Subprocess> proc;
  std::string Value(const std::string& key) const {
    std::string out = proc->Output();
    size_t at = out.rfind(key + " ");
    if (at == std::string::npos) return "";
    std::istringstream in(out.substr(at + key.size() + 1));
    std::string v;
    in >> v;
    return v;
  }
};

class ModesTest : public PsTest {
 protected:
  std::vector<TrainerRun> RunTrainers(const std::string& job, const std::vector<int>& sleeps, int steps,
                                      const std::vector<std::string>& extra = {}) {
    std::vector<TrainerRun> runs;
    for (size_t t = 0; t < sleeps.size(); ++t) {
      SpawnOptions o;
      o.argv = LinearTrainer(job, static_cast<int>(t), 50, 4, steps, sleeps.size());
      for (const std::string& a :
           {std::string("--sleep-ms"), std::to_string(sleeps[t]), std::string("--report-leads")})
        o.argv.push_back(a);
      o.argv.insert(o.argv.end(), extra.begin(), extra.end());
      o.log_path = dir_ + "/trainer" + std::to_string(t) + ".log";
      auto p = Subprocess::Spawn(o);
      EXPECT_TRUE(p.ok());
      runs.push_back({std::move(*p)});
    }
    for (auto& r : runs) {
      auto code = r.proc->Wait(std::chrono::seconds(120));
      EXPECT_TRUE(code.has_value() && *code == 0) << r.proc->Output();
    }
    return runs;
  }
};

TEST_F(ModesTest, SspNeverLetsATrainerReadMoreThanTwoClocksAheadOfTheSlowest) {
  const std::string job = "ssp";
  MakeJob(job, 2, "ssp:2", "sgd:lr=0.05", 16, /*min_trainers=*/3);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  auto runs = RunTrainers(job, {0, 20, 80}, 25);
  int64_t fastest_lead = 0;
  for (size_t t = 0; t < runs.size(); ++t) {
    std::string lead = runs[t].Value("MAX_LEAD");
    ASSERT_FALSE(lead.empty()) << runs[t].proc->Output();
    EXPECT_LE(std::stoll(lead), 2) << "trainer " << t << " read parameters too far ahead";
    if (t == 0) fastest_lead = std::stoll(lead);
  }
  // The bound was binding, not vacuous: the fast trainer ran right up to it.
  EXPECT_EQ(fastest_lead, 2) << runs[0].proc->Output();
}

TEST_F(ModesTest, AsyncConvergesWithUnevenTrainers) {
  const std::string job = "async";
  MakeJob(job, 2, "async", "sgd:lr=0.1", 16);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  auto runs = RunTrainers(job, {0, 15}, 40);
  std::vector<float> w0(50);
  for (int j = 0; j < 50; ++j) w0[j] = InitialWeight(j);
  double initial = EvalLoss(w0);
  for (auto& r : runs) {
    std::string loss = r.Value("FINAL_LOSS");
    ASSERT_FALSE(loss.empty()) << r.proc->Output();
    EXPECT_LT(std::stod(loss), initial / 10) << "initial loss " << initial;
  }
}

}  // namespace
}  // namespace tessera::testing
