// `tessera local --spec job.yaml`: the job spec that `tessera launch` and `tessera deploy k8s`
// take runs on one machine as the same job its flags describe (bit for bit, for a job whose
// steps do not depend on timing), and flags given beside the spec override it.
#include <gtest/gtest.h>

#include <fstream>

#include "local/local_fixture.h"
#include "tessera/model_file.h"

namespace tessera::testing {
namespace {

TEST_F(LocalTest, ASpecRunsTheJobItsFlagsDescribeBitForBitAndFlagsOverrideIt) {
  UploadFashionMnist(/*test_set=*/false);
  // One trainer in sync mode: its steps, and so the parameters, do not depend on timing. The
  // settings differ from `tessera local`'s defaults wherever they can (masters, optimizer, mode
  // settings, task settings), so a setting the spec dropped would change the model or the run.
  const std::string spec = dir_ + "/job.yaml";
  std::ofstream(spec) << "name: spec\n"
                         "masters: 1\n"
                         "pservers: 2\n"
                         "trainers: 1\n"
                         "train:\n"
                         "  dataset: fm\n"
                         "  model: mlp\n"
                         "  model_args: [hidden=16]\n"
                         "  optimizer: momentum:lr=0.02\n"
                         "  batch_size: 32\n"
                         "  passes: 2\n"
                         "  checkpoint_every: 0\n"
                         "  chunks_per_task: 2\n"
                         "  task_timeout: 45\n"
                         "store: {path: " +
                             store() + "}\n";
  const std::vector<std::string> flags = {"--job",
                                          "spec",
                                          "--dataset",
                                          "fm",
                                          "--model",
                                          "mlp",
                                          "--model-arg",
                                          "hidden=16",
                                          "--pservers",
                                          "2",
                                          "--trainers",
                                          "1",
                                          "--optimizer",
                                          "momentum:lr=0.02",
                                          "--batch-size",
                                          "32",
                                          "--passes",
                                          "2",
                                          "--chunks-per-task",
                                          "2",
                                          "--task-timeout",
                                          "45"};

  run_name_ = "flags";
  Subprocess& a = StartLocal(flags);
  auto a_code = a.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(a_code.has_value() && *a_code == 0) << a.Output() << LogsTail(40);
  auto model_a = models::ReadModelFile(run() + "/model.tsm");
  ASSERT_TRUE(model_a.ok()) << model_a.status();

  run_name_ = "spec";
  Subprocess& b = StartLocal({"--spec", spec});
  auto b_code = b.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(b_code.has_value() && *b_code == 0) << b.Output() << LogsTail(40);
  EXPECT_NE(b.Output().find("job spec finished"), std::string::npos) << "the spec's name: " << b.Output();
  EXPECT_FALSE(std::filesystem::exists(run() + "/logs/master-1.log")) << "masters: 1, no standby";
  auto model_b = models::ReadModelFile(run() + "/model.tsm");
  ASSERT_TRUE(model_b.ok()) << model_b.status();
  ExpectSameParameters(*model_a, *model_b);
  EXPECT_EQ(Result()["tasks"], 23) << "46 chunks, 2 a task: the spec's chunks_per_task";

  // A flag beside the spec wins over it.
  run_name_ = "override";
  Subprocess& c = StartLocal({"--spec", spec, "--passes", "1", "--job", "other"});
  auto c_code = c.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(c_code.has_value() && *c_code == 0) << c.Output() << LogsTail(40);
  EXPECT_EQ(Result()["passes"], 1);
  EXPECT_EQ(Result()["job"], "other");

  // A mistake in the spec is refused before anything starts, naming the field.
  std::ofstream(dir_ + "/typo.yaml") << "name: t\ntrain: {dataset: fm, model: mlp, pases: 2}\n";
  auto typo = Tessera({"local", "--spec", dir_ + "/typo.yaml", "--store", store(), "--run", dir_ + "/typo"});
  EXPECT_EQ(typo.code, 1);
  EXPECT_NE(typo.out.find("typo.yaml: train.pases: unknown field (did you mean 'passes'?)"),
            std::string::npos)
      << typo.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/typo")) << "nothing started";
}

}  // namespace
}  // namespace tessera::testing
