// The trainer's time line: what PhasesSummary writes, PhasesFromLine reads back (benches and the
// job tests read it from the trainers' logs).
#include "models/trainer.h"

#include <gtest/gtest.h>

namespace tessera::models {
namespace {

TEST(TrainerPhasesTest, TheLastLinesTimesReadBackWithEvaluateOnlyWhenThereWasOne) {
  TrainerResult::Phases p;
  p.read = 0.089;
  p.compute = 1.635;
  p.exchange = 0.79;
  p.acknowledge = 0.009;
  const std::string plain = PhasesSummary(p);
  EXPECT_EQ(plain, "read 0.089 s, compute 1.635 s, exchange 0.790 s, acknowledge 0.009 s");
  const std::string line =
      "2026-11-26 17:13:08.685 I [job=local node=trainer-0] trainer done: 1876 steps, "
      "120000 samples; in place: 1876 requests, 1876 replies (0 renewals); time: " +
      plain;
  auto back = PhasesFromLine(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->read, 0.089);
  EXPECT_DOUBLE_EQ(back->compute, 1.635);
  EXPECT_DOUBLE_EQ(back->exchange, 0.79);
  EXPECT_DOUBLE_EQ(back->acknowledge, 0.009);
  EXPECT_EQ(back->evaluate, 0);

  p.evaluate = 0.195;
  EXPECT_EQ(PhasesSummary(p), plain + ", evaluate 0.195 s");
  back = PhasesFromLine("time: " + PhasesSummary(p));
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->evaluate, 0.195);

  EXPECT_FALSE(PhasesFromLine("trainer done: 3 steps, 192 samples").has_value());
  EXPECT_FALSE(PhasesFromLine("time: read 0.1 s, compute x").has_value());
}

}  // namespace
}  // namespace tessera::models
