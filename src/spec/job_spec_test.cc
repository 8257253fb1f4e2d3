// The job spec parser: what it accepts, and that every mistake names its field.
#include "spec/job_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "spec/role_argv.h"

namespace tessera::spec {
namespace {

const char* kGood = R"(
name: fm
image: registry.example/tessera:0.4
namespace: ml
etcd: {members: 3}
masters: 2
pservers: 2
trainers: {min: 2, max: 6}
resources:
  trainer: {cpu: "2", memory: 4Gi, gpu: 1}
  pserver: {cpu: 500m, memory: 8Gi}
train:
  mode: sync
  optimizer: adam:lr=0.001
  passes: 3
  dataset: fm
  eval_dataset: fm-test
  model: mlp
  model_args: [hidden=64]
store: {path: /data/store, claim: tessera-store}
checkpoints: {path: /data/checkpoints, nfs: {server: 10.0.0.5, path: /exports/ckpt}}
)";

std::string Error(const std::string& text) {
  auto s = ParseJobSpec(text, "job.yaml");
  EXPECT_FALSE(s.ok()) << text;
  return s.ok() ? "" : std::string(s.status().message());
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(JobSpecTest, AFullSpecIsRead) {
  auto s = ParseJobSpec(kGood, "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "fm");
  EXPECT_EQ(s->namespace_, "ml");
  EXPECT_EQ(s->etcd_members, 3);
  EXPECT_EQ(s->EtcdText(), "fm-etcd-0.fm-etcd:2379,fm-etcd-1.fm-etcd:2379,fm-etcd-2.fm-etcd:2379");
  EXPECT_EQ(s->trainers_min, 2);
  EXPECT_EQ(s->trainers_max, 6);
  EXPECT_EQ(s->resources.at("trainer").gpus, 1);
  EXPECT_EQ(s->resources.at("pserver").cpu, "500m");
  EXPECT_EQ(s->model_args, std::vector<std::string>{"hidden=64"});
  EXPECT_EQ(s->store.claim, "tessera-store");
  EXPECT_EQ(s->checkpoints.nfs_server, "10.0.0.5");
}

TEST(JobSpecTest, DefaultsAndExternalEtcd) {
  auto s = ParseJobSpec(
      "name: j\netcd: {endpoints: [10.0.0.1:2379, 10.0.0.2:2379]}\ntrainers: 3\n"
      "train: {dataset: d, command: [python3, train.py], checkpoint_every: 0}\nstore: {path: /s}\n",
      "j.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->external_etcd());
  EXPECT_EQ(s->EtcdText(), "10.0.0.1:2379,10.0.0.2:2379");
  EXPECT_EQ(s->trainers_min, 3);
  EXPECT_EQ(s->trainers_max, 3);
  EXPECT_EQ(s->masters, 2);
  EXPECT_EQ(s->command, (std::vector<std::string>{"python3", "train.py"}));
}

TEST(JobSpecTest, TlsPointsEveryProcessAtTheJobsCertificates) {
  auto plain = ParseJobSpec(kGood, "job.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->tls());
  EXPECT_TRUE(plain->TlsEnv().empty());
  EXPECT_EQ(plain->JobCreateArgs().back(), "--if-absent");
  auto s = ParseJobSpec(std::string(kGood) + "tls: {secret: fm-tls}\n", "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tls_dir, "/etc/tessera/tls");
  EXPECT_EQ(s->tls_secret, "fm-tls");
  EXPECT_EQ(s->JobCreateArgs().back(), "--tls");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"TESSERA_TLS_CA", "/etc/tessera/tls/ca.pem"},
      {"TESSERA_TLS_CERT", "/etc/tessera/tls/node.pem"},
      {"TESSERA_TLS_KEY", "/etc/tessera/tls/node.key"}};
  EXPECT_EQ(s->TlsEnv(), want);
  auto hosts = ParseJobSpec(std::string(kGood) + "tls: {path: /srv/tls}\n", "job.yaml");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->TlsEnv()[1].second, "/srv/tls/node.pem");
}

TEST(JobSpecTest, ReplicasGoToJobCreate) {
  auto plain = ParseJobSpec(kGood, "job.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->replicas, 1);
  for (const auto& a : plain->JobCreateArgs()) EXPECT_NE(a, "--replicas");
  auto s = ParseJobSpec(Replace(kGood, "pservers: 2", "pservers: 2\nreplicas: 2"), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  auto args = s->JobCreateArgs();
  auto at = std::find(args.begin(), args.end(), "--replicas");
  ASSERT_NE(at, args.end());
  EXPECT_EQ(*(at + 1), "2");
}

TEST(JobSpecTest, StartPserversMustFitThePservers) {
  auto s = ParseJobSpec(Replace(kGood, "pservers: 2", "pservers: 2\nstart_pservers: 1"), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->start_pservers, 1);
  std::string e = Error(Replace(kGood, "pservers: 2", "pservers: 2\nstart_pservers: 3"));
  EXPECT_NE(e.find("start_pservers: must be between 1 and pservers (2) for an elastic job, or 0"),
            std::string::npos)
      << e;
}

TEST(JobSpecTest, AMisspeltFieldIsRefusedWithItsLikelyName) {
  std::string e = Error(Replace(kGood, "pservers: 2", "pserver: 2"));
  EXPECT_NE(e.find("job.yaml: pserver: unknown field (did you mean 'pservers'?)"), std::string::npos) << e;
  e = Error(Replace(kGood, "eval_dataset", "eval_datset"));
  EXPECT_NE(e.find("train.eval_datset: unknown field (did you mean 'eval_dataset'?)"), std::string::npos)
      << e;
  e = Error(Replace(kGood, "gpu: 1", "gpus: 1"));
  EXPECT_NE(e.find("resources.trainer.gpus"), std::string::npos) << e;
}

TEST(JobSpecTest, EveryBadValueNamesItsField) {
  struct Case {
    std::string from, to, field;
  } cases[] = {
      {"name: fm", "name: Fm_1", "name"},
      {"name: fm", "image: x", "name: is required"},
      {"members: 3", "members: 2", "etcd.members"},
      {"pservers: 2", "pservers: 2\nreplicas: 3", "replicas: must be between 1 and pservers (2)"},
      {"max: 6", "max: 1", "trainers.max"},
      {"memory: 4Gi", "memory: 4 GB", "resources.trainer.memory"},
      {"passes: 3", "passes: three", "train.passes: 'three' is not a whole number"},
      {"mode: sync", "mode: eventually", "train.mode"},
      {"optimizer: adam:lr=0.001", "optimizer: adamw", "train.optimizer"},
      {"model: mlp", "model: resnet", "train.model"},
      {"  model: mlp\n", "  command: [python3, x.py]\n  model: mlp\n", "train.model: give either"},
      {"model_args: [hidden=64]", "model_args: hidden=64", "train.model_args: must be a list"},
      {"path: /data/store", "path: data/store", "store.path"},
      {"claim: tessera-store", "claim: s, nfs: {server: a, path: /b}", "store.claim"},
      {"nfs: {server: 10.0.0.5, path: /exports/ckpt}", "nfs: {server: 10.0.0.5}", "checkpoints.nfs"},
      {"namespace: ml", "namespace: ML", "namespace"},
      {"store: {", "tls: {path: certs}\nstore: {", "tls.path"},
      {"store: {", "tls: {secret: My_Certs}\nstore: {", "tls.secret"},
      {"store: {", "tls: {secert: x}\nstore: {", "tls.secert: unknown field (did you mean 'secret'?)"},
      {"passes: 3", "passes: 3\n  nonfinite: ignore", "train.nonfinite: must be skip or error"},
      {"passes: 3", "passes: 3\n  task_timeout: 0", "train.task_timeout"},
      {"passes: 3", "passes: 3\n  wire: fp8", "train.wire: wire format 'fp8' is not f32, bf16"},
      {"passes: 3", "passes: 3\n  wire: topk:5", "train.wire: wire format 'topk:5': topk needs the fraction"},
      {"passes: 3", "passes: 3\n  wire: bf16,f16",
       "train.wire: wire 'bf16,f16': item 2 ('f16') names no parameter"},
      {"passes: 3", "passes: 3\n  max_failures: -1", "train.max_failures"},
      {"passes: 3", "passes: 3\n  chunks_per_task: -2", "train.chunks_per_task"},
      {"passes: 3", "passes: 3\n  checkpoint_steps: x", "train.checkpoint_steps: 'x' is not a whole number"},
      {"passes: 3", "passes: 3\n  checkpoint_step: 5", "did you mean 'checkpoint_steps'?"},
      // What the job's configuration refuses, in its words.
      {"passes: 3", "passes: 3\n  backup_trainers: 2", "backup trainers (2) must be fewer"},
      {"mode: sync", "mode: async\n  checkpoint_steps: 10",
       "checkpoint steps (consistent checkpoints) need sync"},
  };
  for (const auto& c : cases) {
    std::string e = Error(Replace(kGood, c.from, c.to));
    EXPECT_NE(e.find(c.field), std::string::npos) << c.to << " -> " << e;
  }
}

TEST(JobSpecTest, BrokenYamlSaysWhereAndNothingElseIsASpec) {
  std::string e = Error("name: fm\ntrain: {dataset: [\n");
  EXPECT_NE(e.find("job.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
  e = Error("- a\n- b\n");
  EXPECT_NE(e.find("mapping"), std::string::npos) << e;
  e = Error("name: fm\nstore: {path: /s}\n");
  EXPECT_NE(e.find("train: is required"), std::string::npos) << e;
  EXPECT_NE(Error("name: fm\ntrain: {dataset: d, model: mlp}\nstore: {path: /s}\n").find("checkpoints"),
            std::string::npos);
}

TEST(JobSpecTest, TheJobsSettingsGoToItsConfigurationAndTheMaster) {
  auto s = ParseJobSpec(Replace(kGood, "passes: 3", R"(passes: 3
  checkpoint_steps: 50
  backup_trainers: 1
  nonfinite: error
  wire: topk:0.01
  task_timeout: 12.5
  max_failures: 7
  chunks_per_task: 2)"),
                        "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  auto c = JobConfigOf(*s);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pservers, 2);
  EXPECT_EQ(c->min_trainers, 2);
  EXPECT_EQ(c->checkpoint_steps, 50);
  EXPECT_EQ(c->backup_trainers, 1);
  EXPECT_EQ(c->nonfinite, NonFinitePolicy::kError);
  EXPECT_EQ(c->wire.ToString(), "topk:0.01");
  const std::vector<std::string> create = s->JobCreateArgs();
  for (const char* want :
       {"--checkpoint-steps", "50", "--backup-trainers", "1", "--nonfinite", "error", "--wire", "topk:0.01"})
    EXPECT_NE(std::find(create.begin(), create.end(), want), create.end()) << want;
  // Consistent checkpoints alone still give the pservers their directory.
  s->checkpoint_every = 0;
  const std::vector<std::string> pserver = PserverArgs(*s, PortChoice::kAny);
  EXPECT_NE(std::find(pserver.begin(), pserver.end(), "--checkpoint-dir"), pserver.end());
  EXPECT_EQ(std::find(pserver.begin(), pserver.end(), "--checkpoint-every"), pserver.end());
  const std::vector<std::string> master = MasterArgs(*s, PortChoice::kAny);
  for (const char* want : {"--task-timeout", "12.5", "--max-failures", "7", "--chunks-per-task", "2"})
    EXPECT_NE(std::find(master.begin(), master.end(), want), master.end()) << want;
}

TEST(JobSpecTest, OnThisMachineTheStoreAndCheckpointDirectoryMayBeLeftOut) {
  const char* local = "name: fm\ntrain: {dataset: fm, model: mlp}\n";
  EXPECT_NE(Error(local).find("store: is required"), std::string::npos);
  auto s = ParseJobSpec(local, "job.yaml", Where::kThisMachine);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->store.path.empty());
  EXPECT_EQ(s->checkpoint_every, 30);
  // The values are checked all the same.
  EXPECT_FALSE(
      ParseJobSpec("name: fm\ntrain: {dataset: fm, model: mlp, passes: 0}\n", "job.yaml", Where::kThisMachine)
          .ok());
}

}  // namespace
}  // namespace tessera::spec
