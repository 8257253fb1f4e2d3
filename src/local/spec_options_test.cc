// A local run's options from a job spec: every setting that means something on one machine.
#include "local/spec_options.h"

#include <gtest/gtest.h>

namespace tessera::local {
namespace {

spec::JobSpec Parse(const std::string& text) {
  auto s = spec::ParseJobSpec(text, "job.yaml", spec::Where::kThisMachine);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : spec::JobSpec{};
}

TEST(SpecOptionsTest, EverySettingOfTheSpecReachesTheLocalRun) {
  spec::JobSpec s = Parse(R"(
name: fm
masters: 2
pservers: 3
replicas: 2
start_pservers: 2
trainers: {min: 2, max: 4}
train:
  mode: sync
  optimizer: sgd:lr=0.1
  passes: 5
  dataset: fm
  eval_dataset: fm-test
  model: mlp
  model_args: [hidden=32]
  batch_size: 16
  lease_ttl: 4
  checkpoint_every: 2
  checkpoint_steps: 40
  backup_trainers: 1
  nonfinite: error
  task_timeout: 9
  max_failures: 5
  chunks_per_task: 2
  transport: tcp
store: {path: /data/store}
checkpoints: {path: /data/ckpt}
etcd: {endpoints: ["10.0.0.1:2379", "10.0.0.2:2379"]}
)");
  LocalOptions o;
  o.run_dir = "/runs/r1";  // what the spec does not say stays
  o.follow = true;
  ASSERT_TRUE(ApplySpec(s, &o).ok());
  EXPECT_EQ(o.run_dir, "/runs/r1");
  EXPECT_TRUE(o.follow);
  EXPECT_EQ(o.job, "fm");
  EXPECT_EQ(o.etcd, "10.0.0.1:2379,10.0.0.2:2379");
  EXPECT_EQ(o.store, "/data/store");
  EXPECT_EQ(o.dataset, "fm");
  EXPECT_EQ(o.eval_dataset, "fm-test");
  EXPECT_EQ(o.model, "mlp");
  EXPECT_TRUE(o.trainer_cmd.empty());
  EXPECT_EQ(o.model_args, std::vector<std::string>{"hidden=32"});
  EXPECT_EQ(o.batch_size, 16);
  EXPECT_EQ(o.pservers, 3);
  EXPECT_EQ(o.replicas, 2);
  EXPECT_EQ(o.start_pservers, 2);
  EXPECT_EQ(o.trainers, 4);
  EXPECT_EQ(o.min_trainers, 2);
  EXPECT_EQ(o.standby_masters, 1);
  EXPECT_EQ(o.mode, "sync");
  EXPECT_EQ(o.optimizer, "sgd:lr=0.1");
  EXPECT_EQ(o.passes, 5);
  EXPECT_EQ(o.lease_ttl_seconds, 4);
  EXPECT_EQ(o.checkpoint_every, 2);
  EXPECT_EQ(o.checkpoint_dir, "/data/ckpt");
  EXPECT_EQ(CheckpointDirOf(o), "/data/ckpt");
  EXPECT_EQ(o.checkpoint_steps, 40);
  EXPECT_EQ(o.backup_trainers, 1);
  EXPECT_EQ(o.nonfinite, "error");
  EXPECT_EQ(o.task_timeout_s, 9);
  EXPECT_EQ(o.max_failures, 5);
  EXPECT_EQ(o.chunks_per_task, 2);
  EXPECT_EQ(o.transport, "tcp");
}

TEST(SpecOptionsTest, TheSpecsCommandIsQuotedForTheShellAndDefaultsStay) {
  spec::JobSpec s = Parse(R"(
name: own
train: {dataset: d, command: [python3, "my train.py", "--note=it's"]}
)");
  LocalOptions o;
  o.model = "logreg";  // a spec's trainer replaces the other kind
  ASSERT_TRUE(ApplySpec(s, &o).ok());
  EXPECT_TRUE(o.model.empty());
  EXPECT_EQ(o.trainer_cmd, "python3 'my train.py' '--note=it'\\''s'");
  EXPECT_TRUE(o.store.empty()) << "no store in the spec: --store's";
  EXPECT_EQ(CheckpointDirOf(LocalOptions{.run_dir = "/r"}), "/r/checkpoints");
  EXPECT_EQ(o.trainers, 1);
  EXPECT_EQ(o.standby_masters, 1) << "the spec's default: a leader and a standby";
}

TEST(SpecOptionsTest, TlsIsRefusedWithWhy) {
  spec::JobSpec s = Parse("name: t\ntrain: {dataset: d, model: mlp}\ntls: {path: /etc/t}\n");
  LocalOptions o;
  Status st = ApplySpec(s, &o);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tessera launch"), std::string::npos) << st;
}

}  // namespace
}  // namespace tessera::local
