// One job spec on the platform and on this machine: `tessera submit --spec job.yaml` trains the
// same model, bit for bit, as `tessera local --spec job.yaml` on the same data set (one trainer in
// sync mode: its steps do not depend on timing), with every setting of the spec carried through;
// what the platform places itself (the store, checkpoints, etcd ...) is refused in a submitted
// spec, and a spec's mistakes are refused before anything is sent.
#include <fstream>

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
class SpecSubmitTest : public CliTest {};

TEST_P(SpecSubmitTest, OneSpecTrainsTheSameModelOnThePlatformAndOnThisMachine) {
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
  Ran local = Cli(
      {"local", "--spec", spec, "--store", dir_ + "/server/datasets/ada", "--run", dir_ + "/here"}, "", 400);
  ASSERT_EQ(local.code, 0) << local.out;
  auto here = models::ReadModelFile(dir_ + "/here/model.tsm");
  ASSERT_TRUE(here.ok()) << here.status();
  ASSERT_EQ(here->tensors.size(), on_platform->tensors.size());
  for (size_t i = 0; i < here->tensors.size(); ++i) {
    EXPECT_EQ(here->tensors[i].name, on_platform->tensors[i].name);
    EXPECT_TRUE(here->tensors[i].values == on_platform->tensors[i].values)
        << here->tensors[i].name << " differs between the platform and this machine";
  }
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
