// One job spec, four ways: `tessera submit --spec job.yaml` (the platform), `tessera local --spec
// job.yaml` and `tessera launch --mpi --spec job.yaml` train the same model, bit for bit, on the
// same data set (one trainer in sync mode: its steps do not depend on timing), with every setting
// of the spec carried through, and `tessera deploy k8s --spec job.yaml` renders it into manifests
// that pass the Kubernetes schemas. What differs between the places is given with --set (where
// the store is), not by editing the file. What the platform places itself (the store,
// checkpoints, etcd ...) is refused in a submitted spec, and a spec's mistakes are refused before
// anything is sent.
#include <fstream>

#include "common/process.h"
#include "harness/subprocess.h"
#include "server/cli_fixture.h"
#include "tessera/model_file.h"

namespace tessera::server {
namespace {

const char* kSpec = R"(name: same
masters: 1
pservers: 2
trainers: 1
train:
  dataset: fm
  model: mlp
  model_args: [hidden=16]
  optimizer: momentum:lr=0.02
  batch_size: 32
  passes: 2
  checkpoint_every: 0
  chunks_per_task: 1
  task_timeout: 45
)";

// Once, on SQLite: what the database does here is what CliTest checks on both.
class SpecSubmitTest : public CliTest {
 protected:
  // The model at `path` has the same tensors, bit for bit, as `want`.
  void ExpectSameModel(const models::ModelFile& want, const std::string& path, const std::string& where) {
    auto got = models::ReadModelFile(path);
    ASSERT_TRUE(got.ok()) << where << ": " << got.status();
    ASSERT_EQ(got->tensors.size(), want.tensors.size()) << where;
    for (size_t i = 0; i < got->tensors.size(); ++i) {
      EXPECT_EQ(got->tensors[i].name, want.tensors[i].name) << where;
      EXPECT_TRUE(got->tensors[i].values == want.tensors[i].values)
          << want.tensors[i].name << " differs between the platform and " << where;
    }
  }
};

TEST_P(SpecSubmitTest, OneSpecTrainsTheSameModelFourWays) {
  SignUpAndLogIn();
  UploadFm();
  const std::string spec = dir_ + "/job.yaml";
  std::ofstream(spec) << kSpec;

  Ran sub = Cli({"submit", "--spec", spec, "--wait"}, "", 400);
  ASSERT_EQ(sub.code, 0) << sub.out;
  const std::string id = JobId(sub.out);
  ASSERT_FALSE(id.empty()) << sub.out;
  Json job = JobJson(id);
  EXPECT_EQ(job["spec"]["spec"]["train"]["chunks_per_task"], 1) << job.dump(1);
  EXPECT_EQ(job["spec"]["spec"]["train"]["task_timeout"], 45) << job.dump(1);
  EXPECT_EQ(job["spec"]["pservers"], 2) << "the lists' fields come from the spec";
  auto on_platform = models::ReadModelFile(dir_ + "/server/jobs/" + id + "/run/model.tsm");
  ASSERT_TRUE(on_platform.ok()) << on_platform.status();

  // The same file on this machine, on the very data set the platform trained on.
  const std::string ada_store = dir_ + "/server/datasets/ada";
  Ran local = Cli({"local", "--spec", spec, "--store", ada_store, "--run", dir_ + "/here"}, "", 400);
  ASSERT_EQ(local.code, 0) << local.out;
  ExpectSameModel(*on_platform, dir_ + "/here/model.tsm", "tessera local");

  // With one mpirun, the store where the ranks see it given by --set.
  if (FindProgram("mpirun").ok()) {
    Ran mpi =
        Cli({"launch", "--spec", spec, "--set", "store.path=" + ada_store, "--mpi", "--run", dir_ + "/mpi"},
            "", 400);
    ASSERT_EQ(mpi.code, 0) << mpi.out;
    ExpectSameModel(*on_platform, dir_ + "/mpi/model.tsm", "tessera launch --mpi");
  } else {
    ADD_FAILURE() << "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)";
  }

  // On Kubernetes, rendered and checked against its schemas; the store a claim mounted at /data.
  Ran k8s = Cli({"deploy", "k8s", "--spec", spec, "--set", "store={path: /data, claim: fm-data}", "--out",
                 dir_ + "/k8s"});
  ASSERT_EQ(k8s.code, 0) << k8s.out;
  auto node = FindProgram("node");
  ASSERT_TRUE(node.ok()) << node.status();
  testing::SpawnOptions check;
  check.argv = {*node, testing::BuildPath("deploy-npm/validate.mjs"), dir_ + "/k8s"};
  auto checked = testing::Subprocess::Spawn(check);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ((*checked)->Wait(std::chrono::seconds(120)).value_or(-1), 0) << (*checked)->Output();
  auto trainers = ReadFile(dir_ + "/k8s/40-trainer-job.yaml");
  ASSERT_TRUE(trainers.ok()) << k8s.out;
  EXPECT_TRUE(Has(*trainers, "claimName: \"fm-data\"")) << *trainers;
  // A setting is checked as the file is.
  Ran set_typo = Cli({"deploy", "k8s", "--spec", spec, "--set", "store.pth=/data", "--out", dir_ + "/k8s2"});
  EXPECT_EQ(set_typo.code, 1);
  EXPECT_TRUE(Has(set_typo.out, "job.yaml (with --set): store.pth: unknown field")) << set_typo.out;

  auto result = ReadFile(dir_ + "/server/jobs/" + id + "/run/result.json");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(Json::parse(*result)["tasks"], 8) << "8 chunks, one a task: the spec's chunks_per_task";

  // What the platform places is refused in a submitted spec, naming the field.
  std::ofstream(dir_ + "/store.yaml") << kSpec << "store: {path: /etc}\n";
  Ran store = Cli({"submit", "--spec", dir_ + "/store.yaml"});
  EXPECT_EQ(store.code, 1);
  EXPECT_TRUE(Has(store.out, "body.spec: store: leave it out on the platform")) << store.out;
  std::ofstream(dir_ + "/etcd.yaml") << kSpec << "etcd: {endpoints: [\"127.0.0.1:2379\"]}\n";
  Ran etcd = Cli({"submit", "--spec", dir_ + "/etcd.yaml"});
  EXPECT_TRUE(Has(etcd.out, "body.spec: etcd: leave it out on the platform")) << etcd.out;
  // The spec and the fields are one or the other.
  Got both = Call("POST", "/api/v1/namespaces/ada/jobs", R"({"spec": {"name": "x", "train": {"dataset": "fm",
      "model": "mlp"}}, "passes": 3})",
                  Token());
  EXPECT_EQ(both.status, 400);
  EXPECT_TRUE(Has(both.body["error"].value("message", ""), "'passes' is part of 'spec'")) << both.body;
  // A mistake in the file is refused before anything is sent, with its place.
  std::ofstream(dir_ + "/typo.yaml") << "name: t\ntrain: {dataset: fm, model: mlp, pases: 2}\n";
  Ran typo = Cli({"submit", "--spec", dir_ + "/typo.yaml"});
  EXPECT_EQ(typo.code, 1);
  EXPECT_TRUE(Has(typo.out, "typo.yaml: train.pases: unknown field (did you mean 'passes'?)")) << typo.out;
  // A flag beside the spec overrides it.
  // (waited for: a job still starting when the test ends can hold its control group past the
  // fixture's clean-up)
  Ran over = Cli({"submit", "--spec", spec, "--name", "other", "--passes", "1", "--wait"}, "", 400);
  ASSERT_EQ(over.code, 0) << over.out;
  Json other = JobJson(JobId(over.out));
  EXPECT_EQ(other["spec"]["passes"], 1) << other.dump(1);
  EXPECT_EQ(other["name"], "other") << other.dump(1);
}

INSTANTIATE_TEST_SUITE_P(Backends, SpecSubmitTest, ::testing::Values("sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
