// The spec a platform job's `tessera local` runs, and its command line: the submission's
// training, placed where the job sees its store and code.
#include <gtest/gtest.h>

#include "server_store/submission.h"
#include "server_backends/local_backend.h"
#include "spec/spec_json.h"

namespace tessera::server {
namespace {

JobLaunch Launch() {
  Submission submitted;
  spec::JobSpec& t = submitted.training;
  t.dataset = "fm";
  t.mode = "async";
  t.optimizer = "sgd:lr=0.1";
  t.passes = 4;
  t.pservers = 2;
  t.trainers_max = 3;
  t.trainers_min = 1;
  t.command = spec::ShellCommand("python3 train.py --epochs 2");
  JobLaunch l;
  l.id = "ada-1234";
  l.job = submitted.Training(l.id);
  l.trainers = 2;  // the scheduler started two of the three
  return l;
}

TEST(LocalBackendSpec, ThePlatformsJobRunsItsSpecWhereTheJobSeesItsFiles) {
  const LocalBackend::JobPaths seen = {"/job/run", "/job/code dir", "/data/ada", "/job/control"};
  const spec::JobSpec s = LocalBackend::SpecOf(Launch(), seen);
  EXPECT_EQ(s.name, "ada-1234");
  EXPECT_EQ(s.store.path, "/data/ada");
  EXPECT_EQ(s.trainers_min, 2) << "the first step waits for those started";
  EXPECT_EQ(s.trainers_max, 2);
  EXPECT_EQ(s.masters, 1);
  EXPECT_EQ(s.checkpoint_every, 0);
  EXPECT_EQ(s.mode, "async");
  EXPECT_EQ(s.passes, 4);
  EXPECT_EQ(s.command, (std::vector<std::string>{"/bin/sh", "-c", "cd '/job/code dir' && python3 train.py --epochs 2"}));
  // What is written reads back as a spec `tessera local` takes.
  auto back = spec::ParseJobSpec(spec::SpecJson(s).dump(), "job-spec.json", spec::Where::kThisMachine);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(spec::SpecJson(*back), spec::SpecJson(s));
  EXPECT_EQ(LocalBackend::Argv("/usr/bin/tessera", seen),
            (std::vector<std::string>{"/usr/bin/tessera", "local", "--spec", "/job/control/job-spec.json", "--run",
                                      "/job/run", "--busy-poll-us", "0"}));
}

TEST(LocalBackendSpec, ABuiltInModelNeedsNoCommand) {
  JobLaunch l = Launch();
  l.job.model = "mlp";
  l.job.command.clear();
  const spec::JobSpec s = LocalBackend::SpecOf(l, {"/r", "/c", "/s", "/k"});
  EXPECT_TRUE(s.command.empty());
  EXPECT_EQ(s.model, "mlp");
}

}  // namespace
}  // namespace tessera::server
