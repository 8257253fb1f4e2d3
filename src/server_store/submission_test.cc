// A job submission: both forms fill the one job spec; what is stored reads back the same, and a
// row an older server wrote (before the submission held a spec) still reads.
#include <gtest/gtest.h>

#include "server_store/submission.h"
#include "spec/spec_json.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

Submission Read(const Json& body) {
  auto s = Submission::FromBody(body.dump());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Submission{};
}

std::string Refusal(const Json& body) {
  auto s = Submission::FromBody(body.dump());
  EXPECT_FALSE(s.ok()) << body;
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(SubmissionTest, TheFieldFormFillsTheSpecOverThePlatformsDefaults) {
  const Submission s = Read({{"name", "fm"},
                             {"package", std::string(64, 'a')},
                             {"command", "python3 train.py --epochs 2"},
                             {"dataset", "fm"},
                             {"eval_dataset", "fm-test"},
                             {"mode", "ssp:2"},
                             {"optimizer", "sgd:lr=0.1"},
                             {"passes", 3},
                             {"batch_size", 16},
                             {"pservers", 2},
                             {"trainers", 4},
                             {"trainers_min", 2},
                             {"priority", 5},
                             {"resources", {{"cpu", 1.5}, {"memory_mb", 1024}}}});
  EXPECT_FALSE(s.whole_spec);
  const spec::JobSpec& t = s.training;
  EXPECT_EQ(t.name, "fm");
  EXPECT_EQ(t.command, (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py --epochs 2"}));
  EXPECT_EQ(s.command(), "python3 train.py --epochs 2");
  EXPECT_EQ(t.dataset, "fm");
  EXPECT_EQ(t.eval_dataset, "fm-test");
  EXPECT_EQ(t.mode, "ssp:2");
  EXPECT_EQ(t.optimizer, "sgd:lr=0.1");
  EXPECT_EQ(t.passes, 3);
  EXPECT_EQ(t.batch_size, 16);
  EXPECT_EQ(t.pservers, 2);
  EXPECT_EQ(t.trainers_max, 4);
  EXPECT_EQ(t.trainers_min, 2);
  EXPECT_EQ(t.masters, 1) << "the platform's default";
  EXPECT_EQ(t.lease_ttl, spec::JobSpec{}.lease_ttl) << "the spec's defaults for the rest";
  EXPECT_EQ(s.priority, 5);
  EXPECT_EQ(s.resources.cpu, 1.5);
  EXPECT_EQ(s.resources.memory_mb, 1024);
  EXPECT_EQ(s.Training("ns-1").name, "ns-1");

  const Submission back = Submission::FromJson(s.ToJson());
  EXPECT_EQ(spec::SpecJson(back.training), spec::SpecJson(s.training));
  EXPECT_EQ(back.ToJson(), s.ToJson());
}

TEST(SubmissionTest, AWholeSpecKeepsEverySettingAndReadsBackTheSame) {
  const Submission s = Read({{"spec",
                              "name: fm\npservers: 3\nreplicas: 2\ntrainers: {min: 2, max: 3}\n"
                              "train: {dataset: fm, model: mlp, checkpoint_steps: 20, backup_trainers: 1, "
                              "lease_ttl: 4}\n"},
                             {"priority", -3}});
  EXPECT_TRUE(s.whole_spec);
  EXPECT_EQ(s.training.replicas, 2);
  EXPECT_EQ(s.training.checkpoint_steps, 20);
  EXPECT_EQ(s.training.lease_ttl, 4);
  EXPECT_EQ(s.training.masters, 2) << "the spec's own default, as the user wrote it";
  EXPECT_EQ(s.ToJson()["trainers"], 3) << "the fields every reader knows are there too";
  EXPECT_EQ(s.ToJson()["model"], "mlp");
  const Submission back = Submission::FromJson(s.ToJson());
  EXPECT_TRUE(back.whole_spec);
  EXPECT_EQ(spec::SpecJson(back.training), spec::SpecJson(s.training));
  EXPECT_EQ(back.priority, -3);
}

// Scaling writes the spec's counts too, so a whole spec and the fields beside it agree.
TEST(SubmissionTest, ScalingChangesTheTrainersTheSpecAsksFor) {
  Submission s = Read({{"spec", "name: fm\ntrainers: {min: 3, max: 4}\ntrain: {dataset: fm, model: mlp}\n"}});
  s.ScaleTo(2);
  EXPECT_EQ(s.training.trainers_max, 2);
  EXPECT_EQ(s.training.trainers_min, 2);
  const Json j = s.ToJson();
  EXPECT_EQ(j["trainers"], 2);
  EXPECT_EQ(j["spec"]["trainers"]["max"], 2);
  EXPECT_EQ(Submission::FromJson(j).training.trainers_max, 2);
}

// Rows as the server before this change wrote them (copied from its ToJson): a field-by-field job
// with a package, and a whole spec an older server scaled in its fields only.
TEST(SubmissionTest, AJobAnOlderServerStoredStillReads) {
  const Json field_form = Json::parse(R"({
    "name": "", "dataset": "fm", "mode": "sync", "optimizer": "adam:lr=0.001", "passes": 2,
    "batch_size": 64, "pservers": 1, "trainers": 2, "trainers_min": 2, "priority": 0,
    "model_args": [], "resources": {"cpu": 0.5, "memory_mb": 512, "gpus": 0},
    "package": "abc", "command": "python3 train.py"})");
  const Submission a = Submission::FromJson(field_form);
  EXPECT_FALSE(a.whole_spec);
  EXPECT_EQ(a.package, "abc");
  EXPECT_EQ(a.command(), "python3 train.py");
  EXPECT_EQ(a.training.trainers_max, 2);
  EXPECT_EQ(a.training.passes, 2);
  EXPECT_EQ(a.training.masters, 1);

  Json whole = Submission::FromJson(
                   Read({{"spec", "name: w\ntrainers: 4\ntrain: {dataset: fm, model: mlp}\n"}}).ToJson())
                   .ToJson();
  whole["trainers"] = 1;  // an older server's Scale wrote only these
  whole["trainers_min"] = 1;
  const Submission b = Submission::FromJson(whole);
  EXPECT_TRUE(b.whole_spec);
  EXPECT_EQ(b.training.trainers_max, 1);
  EXPECT_EQ(b.training.trainers_min, 1);

  const Submission empty = Submission::FromJson(Json::object());
  EXPECT_FALSE(empty.whole_spec);
  EXPECT_EQ(empty.training.trainers_max, 1);
  EXPECT_EQ(empty.training.masters, 1);
}

TEST(SubmissionTest, MistakesAreRefusedNamingTheField) {
  EXPECT_EQ(Refusal({{"model", "mlp"}}), "body: field 'dataset' is required");
  EXPECT_NE(
      Refusal({{"model", "mlp"}, {"dataset", "fm"}, {"command", "python3 x.py"}}).find("goes with 'package'"),
      std::string::npos);
  EXPECT_NE(Refusal({{"model", "mpl"}, {"dataset", "fm"}}).find("did you mean 'mlp'?"), std::string::npos);
  EXPECT_NE(Refusal({{"spec", "name: x\ntrain: {dataset: fm, model: mlp}\n"}, {"passes", 2}})
                .find("'passes' is part of 'spec'"),
            std::string::npos);
  EXPECT_NE(Refusal({{"spec", "name: x\ntrain: {dataset: fm, model: mlp}\nstore: {path: /etc}\n"}})
                .find("body.spec: store: leave it out on the platform"),
            std::string::npos);
  EXPECT_EQ(Refusal({{"model", "mlp"}, {"dataset", "fm"}, {"trainers", 2}, {"trainers_min", 3}}),
            "body: trainers_min (3) is above trainers (2)");
}

}  // namespace
}  // namespace tessera::server
