// Sync mode end to end: 3 trainer processes and 2 pserver processes train a linear model on
// fixed data and end with the same parameters (relative error <= 1e-5) as one process applying
// the same optimizer to the gradient of the three batches concatenated, for each optimizer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "linear_data.h"
#include "ps/ps_fixture.h"
#include "pserver/optimizer.h"

namespace tessera::testing {
namespace {

constexpr int kDim = 300;  // 5 blocks of 64, spread over both pservers
constexpr int kBatch = 6;
constexpr int kSteps = 12;
constexpr int kTrainers = 3;

std::vector<float> Reference(const OptimizerConfig& opt, int64_t block_size) {
  std::vector<float> w(kDim);
  for (int j = 0; j < kDim; ++j) w[j] = InitialWeight(j);
  std::vector<float> s1(kDim), s2(kDim);
  InitState(opt, s1.data(), s2.data(), kDim);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> g(kDim, 0.0f);
    for (int t = 0; t < kTrainers; ++t) AddBatchGradient(step, t, kBatch, w, &g);
    // The pservers update block by block; the math is element-wise, so one call is the same.
    (void)block_size;
    ApplyUpdate(opt, w.data(), g.data(), 1.0f / (kTrainers * kBatch), kDim, s1.data(), s2.data(), step + 1);
  }
  return w;
}

class SyncMatchesOneProcess : public PsTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(SyncMatchesOneProcess, ThreeTrainersTwoPservers) {
  const std::string optimizer = GetParam();
  const std::string job = "sync-lin";
  MakeJob(job, 2, "sync", optimizer, 64, kTrainers);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  ASSERT_NO_FATAL_FAILURE(RunLinearTrainers(job, kTrainers, kDim, kBatch, kSteps, dir_ + "/w"));
  auto expect = Reference(*OptimizerConfig::Parse(optimizer), 64);
  for (int t = 0; t < kTrainers; ++t) {
    std::ifstream f(dir_ + "/w" + std::to_string(t));
    std::vector<float> got;
    float v;
    while (f >> v) got.push_back(v);
    ASSERT_EQ(got.size(), static_cast<size_t>(kDim));
    double diff = 0, norm = 0;
    for (int j = 0; j < kDim; ++j) {
      diff += (got[j] - expect[j]) * (got[j] - expect[j]);
      norm += expect[j] * expect[j];
    }
    double rel = std::sqrt(diff / norm);
    EXPECT_LE(rel, 1e-5) << "trainer " << t << " with " << optimizer;
  }
  // And training did something: the parameters moved toward the true weights.
  std::vector<float> w0(kDim);
  for (int j = 0; j < kDim; ++j) w0[j] = InitialWeight(j);
  EXPECT_LT(EvalLoss(expect), EvalLoss(w0));
}

// Runs the linear job (adam) with kTrainers trainers started with `flags` and 2 pservers, and
// returns each trainer's final parameters as it wrote them; the job's processes end with it.
class SyncBitsTest : public PsTest {
 protected:
  std::vector<std::string> RunJob(const std::string& job, const std::vector<std::string>& flags) {
    MakeJob(job, 2, "sync", "adam:lr=0.05", 64, kTrainers);
    const size_t first = procs_.size();
    StartPserver(job);
    StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, 2));
    RunLinearTrainers(job, kTrainers, kDim, kBatch, kSteps, dir_ + "/" + job, flags);
    std::vector<std::string> out;
    for (int t = 0; t < kTrainers; ++t) {
      std::ifstream f(dir_ + "/" + job + std::to_string(t));
      out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    for (size_t i = first; i < procs_.size(); ++i) procs_[i]->Terminate(std::chrono::seconds(5));
    return out;
  }

  // Every trainer wrote parameters, and the same as in `want`.
  static void ExpectSameBits(const std::vector<std::string>& want, const std::vector<std::string>& got) {
    ASSERT_EQ(want.size(), static_cast<size_t>(kTrainers));
    ASSERT_EQ(got.size(), static_cast<size_t>(kTrainers));
    for (int t = 0; t < kTrainers; ++t) {
      EXPECT_FALSE(want[t].empty());
      EXPECT_EQ(got[t], want[t]) << "trainer " << t;
    }
  }
};

// The same job with every trainer pushing in pieces, one block each and in its own order (so
// blocks are applied before their barriers, and pulls come back early or with the last piece):
// each trainer ends with the bits of the whole-push run.
TEST_F(SyncBitsTest, PushesInPiecesEndWithTheBitsOfWholePushes) {
  auto whole = RunJob("whole", {});
  ExpectSameBits(whole, RunJob("pieces", {"--pieces"}));
}

// Client::PushPullAndWait (what the built-in trainer, the C API and the Python module's waiting
// step use; the first pserver's request is left to the calling thread, the second's to its link's
// thread): each call returns done, and the trainers end with the bits of PushPull and Wait.
TEST_F(SyncBitsTest, PushPullAndWaitEndsWithTheBitsOfPushPull) {
  auto whole = RunJob("whole", {});
  ExpectSameBits(whole, RunJob("here", {"--wait-here"}));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, SyncMatchesOneProcess,
                         ::testing::Values("sgd:lr=0.2", "sgd:lr=0.2,weight_decay=0.01",
                                           "momentum:lr=0.05,momentum=0.9,nesterov=1", "adagrad:lr=0.1",
                                           "adam:lr=0.05", "ftrl:alpha=0.5,beta=1,l1=0.001,l2=0.01"));

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A pserver that holds none of the parameters still takes part in every step: a sync trainer's
// step returns only when every pserver has closed it, so no trainer runs ahead of the pserver
// that holds nothing (it used to be answered at once, and the next push was "not open yet").
TEST_F(PsTest, SyncStepsWaitForAPserverThatHoldsNothing) {
  const std::string kJob = "nothing";
  MakeJob(kJob, 2, "sync", "sgd:lr=0.1", 64, 2);
  StartPserver(kJob);
  StartPserver(kJob);
  ASSERT_TRUE(WaitForPservers(kJob, 2));
  constexpr int kSteps = 40;
  std::vector<Status> failures[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto c = Client::Connect(ClientFor(kJob, std::to_string(t)));
      if (!c.ok()) return failures[t].push_back(c.status());
      std::vector<float> w(5, 0.0f), g(5, 1.0f);  // 5 floats: one block, on one pserver only
      Status s = (*c)->AddDense("w", w.data(), w.size());
      if (s.ok()) s = (*c)->Initialize();
      if (!s.ok()) return failures[t].push_back(s);
      for (int step = 0; step < kSteps; ++step) {
        // Trainer 1 is slower, so trainer 0 would race ahead if it could.
        if (t == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        Gradients grads;
        grads.Dense("w", g);
        grads.samples = 1;
        Handle h = (*c)->PushPull(grads);
        if (Status e = h.Wait(); !e.ok()) failures[t].push_back(e);
        if (h.version() != (*c)->step()) {
          failures[t].push_back(Status::Internal("step " + std::to_string((*c)->step()) +
                                                 " but a pserver is at " + std::to_string(h.version())));
        }
      }
      (void)(*c)->Close();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    EXPECT_TRUE(failures[t].empty()) << "trainer " << t << ": " << failures[t].front();
  }
}

// Backup trainers (sync, 3 trainers, 1 backup): while one trainer does not push at all, the other
// two go on (each step closes without it); when it finally pushes for step 0, its push is late:
// dropped, and it goes on from the open step with the parameters the others have. Without a
// backup trainer the two could not take a single step.
TEST_F(PsTest, WithABackupTrainerAStragglerDoesNotHoldTheStepsBack) {
  const std::string job = "backup";
  backup_trainers_ = 1;
  MakeJob(job, 2, "sync", "sgd:lr=0.1", 16, /*min_trainers=*/3);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  constexpr int kDim = 40;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::vector<float>> w(3, std::vector<float>(kDim));
  for (int t = 0; t < 3; ++t) {
    auto c = Client::Connect(ClientFor(job, std::to_string(t)));
    ASSERT_TRUE(c.ok()) << c.status();
    for (int j = 0; j < kDim; ++j) w[t][j] = InitialWeight(j);
    ASSERT_TRUE((*c)->AddDense("w", w[t].data(), kDim).ok());
    clients.push_back(std::move(*c));
  }
  std::vector<std::thread> init;
  std::vector<Status> inited(3);
  for (int t = 0; t < 3; ++t) init.emplace_back([&, t] { inited[t] = clients[t]->Initialize(); });
  for (auto& t : init) t.join();
  for (const auto& s : inited) ASSERT_TRUE(s.ok()) << s;
  auto step = [&](int t) {
    std::vector<float> g(kDim, 0.0f);
    AddBatchGradient(clients[t]->step(), t, 4, w[t], &g);
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 4;
    return clients[t]->PushPull(grads).Wait();
  };
  // Trainers 0 and 1 take 10 steps; trainer 2 pushes nothing meanwhile.
  std::vector<std::thread> fast;
  std::vector<Status> results(2);
  for (int t = 0; t < 2; ++t) {
    fast.emplace_back([&, t] {
      for (int s = 0; s < 10 && results[t].ok(); ++s) results[t] = step(t);
    });
  }
  for (auto& t : fast) t.join();
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(results[t].ok()) << results[t];
    EXPECT_EQ(clients[t]->step(), 10);
  }
  // The straggler's push for step 0 is late: dropped, and it goes on from step 10 with the
  // parameters the others pulled.
  ASSERT_EQ(clients[2]->step(), 0);
  ASSERT_TRUE(step(2).ok());
  EXPECT_EQ(clients[2]->step(), 10);
  EXPECT_EQ(std::memcmp(w[2].data(), w[0].data(), kDim * sizeof(float)), 0);
  // And it takes part again: step 10 closes with all three (or the first two) pushes.
  std::vector<std::thread> all;
  std::vector<Status> again(3);
  for (int t = 0; t < 3; ++t) all.emplace_back([&, t] { again[t] = step(t); });
  for (auto& t : all) t.join();
  for (int t = 0; t < 3; ++t) {
    ASSERT_TRUE(again[t].ok()) << "trainer " << t << ": " << again[t];
    EXPECT_EQ(clients[t]->step(), 11);
  }
}

}  // namespace
}  // namespace tessera::testing
