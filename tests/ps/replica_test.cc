// Replicas (--replicas 2): a sync job on 3 hand-started pserver processes with 2 trainers loses a
// pserver to SIGKILL at a random step; its shards are taken over by their backups and the job
// goes on without rolling back, ending with parameters bit for bit those of a run without the
// failure (Adam: optimizer state that a re-initialization would lose). The time from the kill to
// the next step is printed (no supervisor revokes the dead lease here: it waits the lease TTL).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "harness/job_probe.h"
#include "job/replica_map.h"
#include "linear_data.h"
#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

constexpr int kDim = 300;
constexpr int kSteps = 30;

// The pid registered for host `index` of `job` (0: none).
int64_t HostPid(etcd::EtcdClient* c, const std::string& job, int index) {
  auto l = Registry(c, keys::PserverHostPrefix(job)).List();
  if (!l.ok()) return 0;
  const Member* m = l->Find(std::to_string(index));
  return m ? nlohmann::json::parse(m->value)["pid"].get<int64_t>() : 0;
}

class ReplicaTest : public PsTest {
 protected:
  struct Run {
    std::vector<float> w;  // trainer 0's parameters after the last step
    double stall = -1;     // the longest wait for a step after the kill, in seconds
  };

  // Trains job `job` (made here) with 2 trainers for kSteps; kills pserver host `victim` when
  // trainer 0 has finished step `kill_at` (-1: never), then starts a replacement.
  Run Train(const std::string& job, int kill_at, int victim) {
    replicas_ = 2;
    MakeJob(job, 3, "sync", "adam:lr=0.05", 16, /*min_trainers=*/2);
    for (int i = 0; i < 3; ++i) StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, 3));
    // Backups in place before training starts, so the kill meets a replicated job.
    std::atomic<int> done_steps{0};
    std::atomic<bool> failed{false};
    std::vector<std::vector<float>> w(2, std::vector<float>(kDim));
    std::vector<std::thread> trainers;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::mutex times_mu;
    std::vector<std::chrono::steady_clock::time_point> step_done;  // trainer 0's steps
    for (int t = 0; t < 2; ++t) {
      trainers.emplace_back([&, t] {
        auto c = Client::Connect(ClientFor(job, std::to_string(t)));
        if (!c.ok()) {
          ADD_FAILURE() << c.status();
          failed = true;
          return;
        }
        auto& client = *c;
        for (int j = 0; j < kDim; ++j) w[t][j] = InitialWeight(j);
        if (!client->AddDense("w", w[t].data(), kDim).ok() || !client->Initialize().ok() ||
            !client->Pull().Wait().ok()) {
          ADD_FAILURE() << "trainer " << t << " did not start";
          failed = true;
          return;
        }
        ++ready;
        while (!go && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int s = 0; s < kSteps && !failed; ++s) {
          std::vector<float> g(kDim, 0.0f);
          AddBatchGradient(s, t, 5, w[t], &g);
          Gradients grads;
          grads.Dense("w", g);
          grads.samples = 5;
          Status st = client->PushPull(grads).Wait();
          if (!st.ok()) {
            ADD_FAILURE() << "trainer " << t << " step " << s << ": " << st;
            failed = true;
            return;
          }
          if (client->step() != s + 1) {
            ADD_FAILURE() << "trainer " << t << " is at step " << client->step() << " after step " << s;
            failed = true;
            return;
          }
          if (t == 0) {
            std::lock_guard<std::mutex> lock(times_mu);
            step_done.push_back(std::chrono::steady_clock::now());
            done_steps = s + 1;
          }
        }
        (void)client->Close();
      });
    }
    // Initialized, then every shard copied to its backup before the first step.
    EXPECT_TRUE(WaitUntil([&] { return ready.load() == 2 || failed; }, std::chrono::seconds(60)));
    EXPECT_TRUE(WaitUntil([&] { return FullyReplicated(client_.get(), job); }, std::chrono::seconds(60)));
    go = true;
    Run run;
    if (kill_at >= 0) {
      EXPECT_TRUE(WaitUntil([&] { return done_steps.load() >= kill_at || failed; }, std::chrono::seconds(60),
                            std::chrono::milliseconds(1)));
      const int64_t pid = HostPid(client_.get(), job, victim);
      EXPECT_GT(pid, 0);
      const int before = done_steps.load();
      const auto killed = std::chrono::steady_clock::now();
      for (auto& p : procs_)
        if (p->pid() == pid) p->Kill();
      // The replacement takes the free host index and receives copies once the dead one's lease
      // is gone (a step ends then too).
      EXPECT_TRUE(WaitUntil([&] { return done_steps.load() > before + 1 || failed; },
                            std::chrono::seconds(60), std::chrono::milliseconds(1)));
      StartPserver(job);
      for (auto& t : trainers) t.join();
      std::lock_guard<std::mutex> lock(times_mu);
      auto last = killed;
      for (auto t : step_done) {
        if (t < killed) continue;
        run.stall = std::max(run.stall, std::chrono::duration<double>(t - last).count());
        last = t;
      }
    }
    for (auto& t : trainers)
      if (t.joinable()) t.join();
    EXPECT_FALSE(failed);
    EXPECT_EQ(std::memcmp(w[0].data(), w[1].data(), kDim * sizeof(float)), 0) << "the trainers disagree";
    run.w = w[0];
    procs_.clear();
    return run;
  }
};

TEST_F(ReplicaTest, APserverKilledAtARandomStepLosesNothingAndRollsNothingBack) {
  const Run clean = Train("clean", -1, 0);
  ASSERT_FALSE(HasFailure());
  std::mt19937 rng(std::random_device{}());
  for (int run = 0; run < 3; ++run) {
    const int kill_at = 3 + static_cast<int>(rng() % (kSteps - 8));
    const int victim = static_cast<int>(rng() % 3);
    SCOPED_TRACE("run " + std::to_string(run) + ": host " + std::to_string(victim) + " killed after step " +
                 std::to_string(kill_at));
    const Run r = Train("kill" + std::to_string(run), kill_at, victim);
    ASSERT_FALSE(HasFailure());
    size_t differ = 0;
    for (int j = 0; j < kDim; ++j) differ += std::memcmp(&r.w[j], &clean.w[j], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << differ << " of " << kDim
                          << " parameters differ from the run without the failure";
    std::printf(
        "replica run %d: host %d killed after step %d; the longest wait for a step after it %.3f s "
        "(lease TTL 2 s)\n",
        run, victim, kill_at, r.stall);
  }
}

// Async, R=2: two trainers push "+1 to every element" as fast as they can while a pserver host is
// killed with SIGKILL; every push a trainer saw acknowledged is in the final model, counted
// element by element (SGD with lr 1: each applied push adds exactly 1).
TEST_F(ReplicaTest, AsyncEveryAcknowledgedPushSurvivesAKilledPserver) {
  const std::string job = "async";
  replicas_ = 2;
  MakeJob(job, 3, "async", "sgd:lr=1", 4);
  for (int i = 0; i < 3; ++i) StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 3));
  constexpr int kCount = 24;  // 6 blocks: on every shard
  constexpr int kPushes = 400;
  std::atomic<int> pushed0{0};
  std::atomic<int64_t> acked{0}, refused{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, failed{false};
  std::vector<float> final_values(kCount);
  std::vector<std::thread> trainers;
  for (int t = 0; t < 2; ++t) {
    trainers.emplace_back([&, t] {
      auto c = Client::Connect(ClientFor(job, std::to_string(t)));
      if (!c.ok()) {
        ADD_FAILURE() << c.status();
        failed = true;
        return;
      }
      std::vector<float> v(kCount, 0.0f);
      if (!(*c)->AddDense("count", v.data(), kCount).ok() || !(*c)->Initialize().ok()) {
        failed = true;
        return;
      }
      ++ready;
      while (!go && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::vector<float> g(kCount, -1.0f);
      for (int i = 0; i < kPushes && !failed; ++i) {
        Gradients grads;
        grads.Dense("count", g);
        grads.samples = 1;
        Status st = (*c)->Push(grads).Wait();
        if (st.ok()) {
          ++acked;
        } else {
          ++refused;  // may or may not have been applied
        }
        if (t == 0) pushed0 = i + 1;
      }
      if (t == 0) {
        // Once both are done: the model as the pservers hold it.
        while (ready.load() < 3 && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (!(*c)->Pull().Wait().ok()) failed = true;
        final_values = v;
      } else {
        ++ready;
      }
      (void)(*c)->Close();
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return ready.load() == 2 || failed; }, std::chrono::seconds(60)));
  ASSERT_TRUE(WaitUntil([&] { return FullyReplicated(client_.get(), job); }, std::chrono::seconds(60)));
  go = true;
  ASSERT_TRUE(WaitUntil([&] { return pushed0.load() >= kPushes / 4 || failed; }, std::chrono::seconds(60),
                        std::chrono::milliseconds(1)));
  const int64_t pid = HostPid(client_.get(), job, 1);
  ASSERT_GT(pid, 0);
  for (auto& p : procs_)
    if (p->pid() == pid) p->Kill();
  for (auto& t : trainers) t.join();
  ASSERT_FALSE(failed);
  std::printf("async: %lld pushes acknowledged, %lld failed\n", static_cast<long long>(acked.load()),
              static_cast<long long>(refused.load()));
  for (int j = 0; j < kCount; ++j) {
    EXPECT_GE(final_values[j], static_cast<float>(acked.load()))
        << "element " << j << " lost acknowledged pushes";
    EXPECT_LE(final_values[j], static_cast<float>(acked.load() + refused.load())) << "element " << j;
  }
}

}  // namespace
}  // namespace tessera::testing
