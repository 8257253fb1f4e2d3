// `tessera local`'s trainer counts: every combination of flags, with and without a spec.
#include "local/trainer_counts.h"

#include <gtest/gtest.h>

#include "local/supervisor.h"

namespace tessera::local {
namespace {

spec::JobSpec Counts(int min, int max) {
  spec::JobSpec s = LocalJobSpec();
  s.trainers_min = min;
  s.trainers_max = max;
  return s;
}

TEST(TrainerCountsTest, WithoutASpecTheFirstStepWaitsForEveryTrainerUnlessToldFewer) {
  spec::JobSpec s = LocalJobSpec();
  SettleTrainerCounts({}, /*from_spec=*/false, &s);
  EXPECT_EQ(s.trainers_max, 1);
  EXPECT_EQ(s.trainers_min, 1);
  SettleTrainerCounts({.trainers = 4}, false, &s);
  EXPECT_EQ(s.trainers_max, 4);
  EXPECT_EQ(s.trainers_min, 4) << "--min-trainers' default 0: all of them";
  s = LocalJobSpec();
  SettleTrainerCounts({.trainers = 4, .min_trainers = 2}, false, &s);
  EXPECT_EQ(s.trainers_min, 2);
  SettleTrainerCounts({.trainers = 4, .min_trainers = 0}, false, &s);
  EXPECT_EQ(s.trainers_min, 4);
}

TEST(TrainerCountsTest, BesideASpecItsMinimumStaysUnlessFewerTrainersAreAskedFor) {
  spec::JobSpec s = Counts(2, 6);
  SettleTrainerCounts({}, /*from_spec=*/true, &s);
  EXPECT_EQ(s.trainers_min, 2);
  EXPECT_EQ(s.trainers_max, 6);
  SettleTrainerCounts({.trainers = 3}, true, &s);
  EXPECT_EQ(s.trainers_min, 2);
  EXPECT_EQ(s.trainers_max, 3);
  SettleTrainerCounts({.trainers = 1}, true, &s);
  EXPECT_EQ(s.trainers_min, 1) << "the first step cannot wait for more than run";
  s = Counts(2, 6);
  SettleTrainerCounts({.min_trainers = 5}, true, &s);
  EXPECT_EQ(s.trainers_min, 5);
  SettleTrainerCounts({.min_trainers = 0}, true, &s);
  EXPECT_EQ(s.trainers_min, 6);
  s = Counts(2, 6);
  SettleTrainerCounts({.trainers = 8, .min_trainers = 7}, true, &s);
  EXPECT_EQ(s.trainers_min, 7);
  EXPECT_EQ(s.trainers_max, 8);
}

// What `tessera local` runs when told nothing: one master, no timed checkpoints, the spec's
// other defaults (so a setting added to the spec has one default everywhere).
TEST(TrainerCountsTest, ALocalRunsDefaultsAreTheSpecsButForMastersAndCheckpoints) {
  const spec::JobSpec local = LocalJobSpec(), cluster;
  EXPECT_EQ(local.name, "local");
  EXPECT_EQ(local.masters, 1);
  EXPECT_EQ(local.checkpoint_every, 0);
  EXPECT_EQ(cluster.masters, 2);
  EXPECT_EQ(local.optimizer, cluster.optimizer);
  EXPECT_EQ(local.lease_ttl, cluster.lease_ttl);
  EXPECT_EQ(local.task_timeout, cluster.task_timeout);
  EXPECT_EQ(local.transport, cluster.transport);
  EXPECT_EQ(CheckpointDirOf(LocalOptions{.run_dir = "/r"}), "/r/checkpoints");
}

}  // namespace
}  // namespace tessera::local
