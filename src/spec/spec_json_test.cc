// A spec written back as JSON reads as the same spec: every field of the format survives.
#include "spec/spec_json.h"

#include <gtest/gtest.h>

namespace tessera::spec {
namespace {

// Every field away from its default, so a field the writer dropped reads back different.
const char* kEverything = R"(
name: all
image: registry.example/tessera:9
image_pull_policy: Always
namespace: ml
etcd: {endpoints: ["10.0.0.1:2379", "10.0.0.2:2379"]}
masters: 3
pservers: 4
replicas: 2
start_pservers: 2
trainers: {min: 2, max: 5}
resources:
  trainer: {cpu: "2", memory: 4Gi, gpu: 1}
  pserver: {cpu: 500m}
train:
  mode: sync
  optimizer: sgd:lr=0.5
  passes: 7
  dataset: d
  eval_dataset: e
  command: [python3, "a b.py"]
  batch_size: 9
  lease_ttl: 4
  checkpoint_every: 2.5
  checkpoint_steps: 20
  backup_trainers: 1
  nonfinite: error
  wire: bf16
  task_timeout: 11.5
  max_failures: 6
  chunks_per_task: 3
  transport: tcp
store: {path: /s, claim: c}
checkpoints: {path: /k, nfs: {server: 10.0.0.9, path: /exp}}
tls: {path: /t, secret: sec}
ports: {http: 81, data: 82}
)";

TEST(SpecJsonTest, EveryFieldSurvivesTheRoundTrip) {
  auto a = ParseJobSpec(kEverything, "job.yaml");
  ASSERT_TRUE(a.ok()) << a.status();
  const std::string text = SpecJson(*a).dump();
  auto b = ParseJobSpec(text, "written");
  ASSERT_TRUE(b.ok()) << b.status() << "\n" << text;
  EXPECT_EQ(SpecJson(*b), SpecJson(*a));
  EXPECT_EQ(b->image_pull_policy, "Always");
  EXPECT_EQ(b->etcd_endpoints.size(), 2u);
  EXPECT_EQ(b->masters, 3);
  EXPECT_EQ(b->replicas, 2);
  EXPECT_EQ(b->start_pservers, 2);
  EXPECT_EQ(b->trainers_min, 2);
  EXPECT_EQ(b->trainers_max, 5);
  EXPECT_EQ(b->resources.at("trainer").gpus, 1);
  EXPECT_EQ(b->resources.at("pserver").cpu, "500m");
  EXPECT_EQ(b->command, (std::vector<std::string>{"python3", "a b.py"}));
  EXPECT_EQ(b->checkpoint_every, 2.5);
  EXPECT_EQ(b->checkpoint_steps, 20);
  EXPECT_EQ(b->backup_trainers, 1);
  EXPECT_EQ(b->nonfinite, "error");
  EXPECT_EQ(b->wire, "bf16");
  EXPECT_EQ(b->task_timeout, 11.5);
  EXPECT_EQ(b->max_failures, 6);
  EXPECT_EQ(b->chunks_per_task, 3);
  EXPECT_EQ(b->transport, "tcp");
  EXPECT_EQ(b->checkpoints.nfs_path, "/exp");
  EXPECT_EQ(b->tls_secret, "sec");
  EXPECT_EQ(b->port, 82);
}

TEST(SpecJsonTest, ALocalSpecWithoutVolumesStaysWithout) {
  auto a = ParseJobSpec("name: l\ntrain: {dataset: d, model: mlp, model_args: [hidden=8]}\n", "job.yaml",
                        Where::kThisMachine);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = ParseJobSpec(SpecJson(*a).dump(), "written", Where::kThisMachine);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->store.path.empty());
  EXPECT_EQ(b->etcd_members, 1);
  EXPECT_EQ(b->model_args, std::vector<std::string>{"hidden=8"});
  EXPECT_FALSE(SpecJson(*b).contains("tls"));
}

}  // namespace
}  // namespace tessera::spec
