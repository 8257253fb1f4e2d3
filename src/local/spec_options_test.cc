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

// SpecOf is ApplySpec's inverse: a run's options, written as a spec and read back, are the same,
// and its job configuration is the one its flags always gave.
TEST(SpecOptionsTest, ARunsOptionsAsASpecReadBackTheSame) {
  LocalOptions o;
  o.job = "round";
  o.etcd = "127.0.0.1:2379";
  o.store = "/s";
  o.dataset = "d";
  o.eval_dataset = "e";
  o.trainer_cmd = "python3 'a b.py'";
  o.model_args = {"k=v"};
  o.batch_size = 7;
  o.pservers = 4;
  o.start_pservers = 2;
  o.replicas = 2;
  o.trainers = 3;
  o.standby_masters = 2;
  o.optimizer = "sgd:lr=0.5";
  o.passes = 9;
  o.checkpoint_every = 1.5;
  o.checkpoint_dir = "/k";
  o.checkpoint_steps = 10;
  o.backup_trainers = 1;
  o.nonfinite = "error";
  o.task_timeout_s = 8;
  o.max_failures = 2;
  o.chunks_per_task = 3;
  o.lease_ttl_seconds = 5;
  o.transport = "tcp";
  LocalOptions back;
  ASSERT_TRUE(ApplySpec(SpecOf(o), &back).ok());
  EXPECT_EQ(back.trainer_cmd, R"(/bin/sh -c 'python3 '\''a b.py'\''')") << "through /bin/sh -c, the same words";
  EXPECT_EQ(back.job, o.job);
  EXPECT_EQ(back.etcd, o.etcd);
  EXPECT_EQ(back.store, o.store);
  EXPECT_EQ(back.dataset, o.dataset);
  EXPECT_EQ(back.eval_dataset, o.eval_dataset);
  EXPECT_EQ(back.model_args, o.model_args);
  EXPECT_EQ(back.batch_size, o.batch_size);
  EXPECT_EQ(back.pservers, o.pservers);
  EXPECT_EQ(back.start_pservers, o.start_pservers);
  EXPECT_EQ(back.replicas, o.replicas);
  EXPECT_EQ(back.trainers, o.trainers);
  EXPECT_EQ(back.min_trainers, 3) << "all of them, as --min-trainers 0 says";
  EXPECT_EQ(back.standby_masters, o.standby_masters);
  EXPECT_EQ(back.mode, o.mode);
  EXPECT_EQ(back.optimizer, o.optimizer);
  EXPECT_EQ(back.passes, o.passes);
  EXPECT_EQ(back.checkpoint_every, o.checkpoint_every);
  EXPECT_EQ(back.checkpoint_dir, o.checkpoint_dir);
  EXPECT_EQ(back.checkpoint_steps, o.checkpoint_steps);
  EXPECT_EQ(back.backup_trainers, o.backup_trainers);
  EXPECT_EQ(back.nonfinite, o.nonfinite);
  EXPECT_EQ(back.task_timeout_s, o.task_timeout_s);
  EXPECT_EQ(back.max_failures, o.max_failures);
  EXPECT_EQ(back.chunks_per_task, o.chunks_per_task);
  EXPECT_EQ(back.lease_ttl_seconds, o.lease_ttl_seconds);
  EXPECT_EQ(back.transport, o.transport);
  // The job: sync waits for every trainer unless told fewer; async for one.
  auto c = spec::JobConfigOf(SpecOf(o));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->min_trainers, 3);
  EXPECT_EQ(c->pservers, 4);
  EXPECT_EQ(c->replicas, 2);
  EXPECT_EQ(c->initial_pservers, 2);
  EXPECT_EQ(c->checkpoint_steps, 10);
  o.min_trainers = 2;
  EXPECT_EQ(spec::JobConfigOf(SpecOf(o))->min_trainers, 2);
  o.mode = "async";
  o.backup_trainers = 0;
  o.checkpoint_steps = 0;
  EXPECT_EQ(spec::JobConfigOf(SpecOf(o))->min_trainers, 1);
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
