// Each built-in model learns on real or generated data under `tessera local`, with thresholds a
// broken gradient or update could not pass; the exported model holds what was trained.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cstdio>
#include <optional>
#include <regex>
#include <sstream>

#include "dataset/dataset.h"
#include "harness/log_lines.h"
#include "local/local_fixture.h"
#include "models/trainer.h"
#include "tessera/example.pb.h"
#include "tessera/model_file.h"

namespace tessera::testing {
namespace {

TEST_F(LocalTest, MlpLearnsFashionMnistAndTheExportedModelHoldsIt) {
  UploadFashionMnist();
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--pservers",
                              "2", "--trainers", "1", "--passes", "1", "--model-arg", "hidden=64"});
  auto code = p.Wait(std::chrono::seconds(240));
  ASSERT_TRUE(code.has_value());
  ASSERT_EQ(*code, 0) << p.Output();
  auto r = Result();
  double accuracy = r["metrics"]["accuracy"];
  EXPECT_GE(accuracy, 0.78) << "one pass of Fashion-MNIST; random guessing is 0.10";
  EXPECT_EQ(r["failed_tasks"], 0);
  EXPECT_EQ(r["samples"], 60000);
  // The exported model reproduces the reported accuracy.
  auto m = models::ReadModelFile(r["model"].get<std::string>());
  ASSERT_TRUE(m.ok()) << m.status();
  const auto *w1 = m->Find("w1"), *b1 = m->Find("b1"), *w2 = m->Find("w2"), *b2 = m->Find("b2");
  ASSERT_TRUE(w1 && b1 && w2 && b2);
  ASSERT_EQ(w1->size, 784 * 64);
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMat> W1(w1->values.data(), 784, 64), W2(w2->values.data(), 64, 10);
  Eigen::Map<const Eigen::RowVectorXf> B1(b1->values.data(), 64), B2(b2->values.data(), 10);
  auto test = dataset::DatasetReader::Open(store(), "fm-test");
  ASSERT_TRUE(test.ok());
  int64_t correct = 0, total = 0;
  std::vector<std::string_view> recs;
  for (size_t c = 0; c < (*test)->manifest().chunks.size(); ++c) {
    ASSERT_TRUE((*test)->ReadChunk(c, &recs).ok());
    for (auto rec : recs) {
      data::Example ex;
      ASSERT_TRUE(ex.ParseFromArray(rec.data(), static_cast<int>(rec.size())));
      Eigen::RowVectorXf x(784);
      for (int j = 0; j < 784; ++j) x[j] = static_cast<unsigned char>(ex.data()[j]) / 255.0f;
      Eigen::RowVectorXf out = ((x * W1 + B1).cwiseMax(0.0f) * W2) + B2;
      Eigen::Index arg;
      out.maxCoeff(&arg);
      correct += arg == ex.label_id();
      ++total;
    }
  }
  EXPECT_NEAR(static_cast<double>(correct) / total, accuracy, 0.002);
}

// The trainer's last line says where its loop's time went: reading, computing and exchanging
// each took some, and together no more than the time from joining to the end.
void ExpectLoopTimesWithinTheRun(const std::string& log) {
  std::optional<models::TrainerResult::Phases> t;
  double joined = -1, done = -1;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("] trainer ") != std::string::npos && line.find(" joined ") != std::string::npos)
      joined = LogLineSeconds(line);
    if (line.find("trainer done:") != std::string::npos) {
      done = LogLineSeconds(line);
      t = models::PhasesFromLine(line);
    }
  }
  ASSERT_TRUE(t.has_value()) << log;
  EXPECT_GT(t->read, 0);
  EXPECT_GT(t->compute, 0);
  EXPECT_GT(t->exchange, 0);
  ASSERT_GT(joined, 0) << log;
  ASSERT_GT(done, joined) << log;
  // The evaluator's evaluations between passes are a phase of their own, not reading.
  EXPECT_EQ(t->evaluate > 0, log.find(" evaluated on ") != std::string::npos) << log;
  EXPECT_LE(t->read + t->compute + t->exchange + t->acknowledge + t->evaluate, done - joined + 0.01) << log;
}

// One trainer and one pserver over shared memory: the mlp's pushes and pulls go in the trainer's
// window (no copy on the trainer's side), each step's first layer is computed while the step
// before is applied, and the model ends bit for bit as the same job over TCP, where every byte is
// copied through sockets and nothing is computed ahead.
TEST_F(LocalTest, MlpOverSharedMemoryTrainsInItsWindowWithTheBitsOfTcp) {
  UploadFashionMnist();
  auto train = [&](const std::string& transport) {
    return TrainToModel("run-" + transport, {"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp",
                                             "--model-arg", "hidden=32", "--pservers", "1", "--trainers", "1",
                                             "--passes", "1", "--transport", transport, "--job", "w"});
  };
  auto shm = train("shm");
  auto log = ReadFile(run() + "/logs/trainer-0.log");
  ASSERT_TRUE(log.ok());
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(*log, m, std::regex(R"(in place: (\d+) requests, (\d+) replies \((\d+) renewals\))")))
      << *log;
  // 938 steps; a connection's first call (the initialization's) brings its region and is copied.
  EXPECT_GE(std::stoi(m[1]), 930);
  EXPECT_GE(std::stoi(m[2]), 930);
  EXPECT_EQ(m[3], "0");
  // And most steps began while the step before travelled: the next batch's first layer computed
  // from the values as the pserver's apply wrote them (a batch that spans two tasks does not).
  ASSERT_TRUE(std::regex_search(*log, m, std::regex(R"((\d+) steps begun on values arriving in place)")))
      << *log;
  EXPECT_GE(std::stoi(m[1]), 800);
  ExpectLoopTimesWithinTheRun(*log);
  auto tcp = train("tcp");
  auto tcp_log = ReadFile(run() + "/logs/trainer-0.log");
  ASSERT_TRUE(tcp_log.ok());
  EXPECT_EQ(tcp_log->find("in place:"), std::string::npos);
  ASSERT_TRUE(shm && tcp);
  ExpectSameParameters(*shm, *tcp);
}

// How many of a trainer's steps began on values arriving in place, and how many it took.
std::pair<int, int> StepsBegunAhead(const std::string& log) {
  std::smatch steps, ahead;
  if (!std::regex_search(log, steps, std::regex(R"(trainer done: (\d+) steps)"))) return {-1, -1};
  if (!std::regex_search(log, ahead, std::regex(R"((\d+) steps begun on values arriving in place)")))
    return {0, std::stoi(steps[1])};
  return {std::stoi(ahead[1]), std::stoi(steps[1])};
}

// Two trainers at a pserver's barrier: the pserver writes both trainers' replies in place as it
// applies the step and tells each its own progress, so both begin their next step on the values
// as they arrive. Before, only the trainer whose push completed the barrier was told (its
// thread's reply), and the other's reply was copied after the apply: about half the steps began
// ahead. With two pservers (the demo's shape), a step's values come over two calls, each told in
// its own word, and the blocks that alternate between them in the trainer's memory are staged
// (client/arriving_values.h): before, nothing began ahead. The work is turned on by hand
// (TESSERA_WORK_AHEAD; the launcher turns it on with busy polling, only where each process has a
// core).
TEST_F(LocalTest, TwoTrainersAtABarrierBothBeginTheirStepsOnValuesArrivingInPlace) {
  UploadFashionMnist(/*test_set=*/false);
  for (const char* pservers : {"1", "2"}) {
    run_name_ = std::string("run-") + pservers;
    Subprocess& p = StartLocal({"--dataset", "fm", "--model", "mlp", "--pservers", pservers, "--trainers",
                                "2", "--passes", "1", "--transport", "shm", "--job", "w"},
                               3, {{"TESSERA_WORK_AHEAD", "1"}});
    auto code = p.Wait(std::chrono::seconds(240));
    ASSERT_TRUE(code.has_value() && *code == 0) << p.Output() << LogsTail(30);
    for (const char* trainer : {"trainer-0", "trainer-1"}) {
      auto log = ReadFile(run() + "/logs/" + trainer + ".log");
      ASSERT_TRUE(log.ok());
      const auto [ahead, steps] = StepsBegunAhead(*log);
      ASSERT_GT(steps, 0) << *log;
      EXPECT_GE(ahead, 0.8 * steps) << pservers << " pservers, " << trainer << ": " << *log;
    }
  }
}

// One trainer and two pservers, whose dense blocks alternate in the trainer's memory: each
// step's values come over both calls, staged where they alternate, and the next step begins on
// them as they arrive, whichever call brings them. The model ends bit for bit as the same job
// over TCP, where the work is tried too but nothing tells it of the values.
TEST_F(LocalTest, TwoPserversValuesArrivingOverBothCallsGiveTheBitsOfTcp) {
  UploadFashionMnist(/*test_set=*/false);
  auto train = [&](const std::string& transport) {
    return TrainToModel("run-" + transport,
                        {"--dataset", "fm", "--model", "mlp", "--pservers", "2", "--trainers", "1",
                         "--passes", "1", "--transport", transport, "--job", "w"},
                        {{"TESSERA_WORK_AHEAD", "1"}});
  };
  auto shm = train("shm");
  auto log = ReadFile(run() + "/logs/trainer-0.log");
  ASSERT_TRUE(log.ok());
  const auto [ahead, steps] = StepsBegunAhead(*log);
  ASSERT_GT(steps, 0) << *log;
  EXPECT_GE(ahead, 0.8 * steps) << *log;
  auto tcp = train("tcp");
  auto tcp_log = ReadFile(run() + "/logs/trainer-0.log");
  ASSERT_TRUE(tcp_log.ok());
  EXPECT_EQ(StepsBegunAhead(*tcp_log).first, 0) << *tcp_log;
  ASSERT_TRUE(shm && tcp);
  ExpectSameParameters(*shm, *tcp);
}

TEST_F(LocalTest, LogregApproachesTheBestAchievableAuc) {
  const double best =
      UploadCtr({"--rows", "60000", "--eval-rows", "10000", "--features", "20000", "--per-row", "15"},
                {"--chunk-size", "131072"});
  ASSERT_FALSE(HasFailure());
  Subprocess& p =
      StartLocal({"--dataset", "ctr", "--eval-dataset", "ctr-eval", "--model", "logreg", "--pservers", "2",
                  "--trainers", "2", "--passes", "3", "--optimizer", "sgd:lr=5", "--batch-size", "256"});
  auto code = p.Wait(std::chrono::seconds(240));
  ASSERT_TRUE(code.has_value() && *code == 0) << p.Output();
  double auc = Result()["metrics"]["auc"];
  std::printf("[ logreg ] AUC %.4f, best achievable %.4f\n", auc, best);
  EXPECT_GE(auc, 0.75);
  EXPECT_GE(auc, best - 0.1);
}

// A data set of 300 records is one chunk; the master cuts it into record ranges so that each of
// three trainers (batch 64) trains some of it, every pass.
TEST_F(LocalTest, ASmallDataSetStillSpreadsOverEveryTrainer) {
  auto gen = Tessera({"gen-ctr", "--train-out", dir_ + "/train.svm", "--eval-out", dir_ + "/eval.svm",
                      "--rows", "300", "--eval-rows", "100", "--features", "500", "--per-row", "5"});
  ASSERT_EQ(gen.code, 0) << gen.out;
  auto up = Tessera({"upload", "--store", store(), "--dataset", "tiny", "--format", "libsvm", "--input",
                     dir_ + "/train.svm"});
  ASSERT_EQ(up.code, 0) << up.out;
  ASSERT_NE(up.out.find("300 records"), std::string::npos) << up.out;
  ASSERT_NE(up.out.find("(1 chunks"), std::string::npos) << "the test needs a one-chunk data set: " << up.out;
  Subprocess& p = StartLocal({"--dataset", "tiny", "--model", "logreg", "--trainers", "3", "--passes", "3",
                              "--batch-size", "64", "--optimizer", "sgd:lr=1", "--job", "tiny"});
  auto code = p.Wait(std::chrono::seconds(240));
  ASSERT_TRUE(code.has_value() && *code == 0) << p.Output() << LogsTail();
  EXPECT_EQ(Result()["samples"].get<int64_t>(), 900) << "every record of every pass, once";
  for (int t = 0; t < 3; ++t) {
    auto log = ReadFile(run() + "/logs/trainer-" + std::to_string(t) + ".log");
    ASSERT_TRUE(log.ok());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*log, m, std::regex("trainer done: [0-9]+ steps, ([0-9]+) samples")))
        << *log;
    int64_t samples = std::stoll(m[1].str());
    std::printf("trainer %d trained %lld records\n", t, static_cast<long long>(samples));
    EXPECT_GT(samples, 0) << "trainer " << t << " got nothing to train";
  }
  auto master = ReadFile(run() + "/logs/master-0.log");
  ASSERT_TRUE(master.ok());
  EXPECT_NE(master->find("cut into record ranges"), std::string::npos) << *master;
}

TEST_F(LocalTest, Word2vecPutsWordsThatOccurTogetherCloser) {
  std::string bible = dir_ + "/bible.txt";
  ASSERT_EQ(std::system(("/usr/bin/bible -f Gen1:1-Rev22:21 > " + bible).c_str()), 0);
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "kjv", "--format", "text", "--input", bible,
                     "--chunk-size", "131072"})
                .code,
            0);
  Subprocess& p =
      StartLocal({"--dataset", "kjv", "--eval-dataset", "kjv", "--model", "word2vec", "--pservers", "2",
                  "--trainers", "2", "--passes", "2", "--optimizer", "adagrad:lr=0.2"});
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value() && *code == 0) << p.Output();
  auto r = Result();
  double gap = r["metrics"]["related_minus_random"];
  std::printf("[ word2vec ] related %.3f, random %.3f\n", r["metrics"]["related"].get<double>(),
              r["metrics"]["random"].get<double>());
  EXPECT_GE(gap, 0.1) << "untrained vectors give about 0";
  // Both tables were exported with rows.
  auto m = models::ReadModelFile(r["model"].get<std::string>());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_NE(m->Find("in"), nullptr);
  EXPECT_GT(m->Find("in")->keys.size(), 5000u);
  EXPECT_EQ(m->Find("in")->dim, 32);
}

}  // namespace
}  // namespace tessera::testing
