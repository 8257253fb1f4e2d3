// Replicas (--replicas 2): a sync job on 3 hand-started pserver processes with 2 trainers loses a
// pserver to SIGKILL at a random step; its shards are taken over by their backups and the job
// goes on without rolling back, ending with parameters bit for bit those of a run without the
// failure (Adam: optimizer state that a re-initialization would lose). The time from the kill to
// the next step is printed (no supervisor revokes the dead lease here: it waits the lease TTL).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
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

constexpr int kReplicaDim = 300;

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
    std::vector<float> w;                         // trainer 0's parameters after the last step
    std::chrono::steady_clock::time_point since;  // the fault, for `stall`
    double stall = -1;                            // the longest wait for a step after `since`, in seconds
  };

  int steps_ = 30;   // steps each trainer takes
  int pace_ms_ = 0;  // a trainer's compute time per step (slept)

  // Kills pserver host `victim` once trainer 0 finished step `kill_at`, and starts a replacement.
  void KillAt(const std::string& job, const std::atomic<int>& done, Run* run, int kill_at, int victim) {
    EXPECT_TRUE(WaitUntil([&] { return done.load() >= kill_at; }, std::chrono::seconds(60),
                          std::chrono::milliseconds(1)));
    const int64_t pid = HostPid(client_.get(), job, victim);
    EXPECT_GT(pid, 0);
    const int before = done.load();
    run->since = std::chrono::steady_clock::now();
    for (auto& p : procs_)
      if (p->pid() == pid) p->Kill();
    // The replacement takes the free host index and receives copies once the dead one's lease is
    // gone (a step ends then too).
    EXPECT_TRUE(WaitUntil([&] { return done.load() > before + 1; }, std::chrono::seconds(60),
                          std::chrono::milliseconds(1)));
    StartPserver(job);
  }

  // Trains job `job` (made here, `pservers` shards, with the fixture's replicas_ and
  // initial_pservers_) with 2 trainers for kSteps on `processes` pserver processes; `during` runs
  // on this thread once training started, with trainer 0's finished steps.
  Run Train(const std::string& job, int pservers, int processes,
            const std::function<void(const std::atomic<int>& done, Run* run)>& during) {
    MakeJob(job, pservers, "sync", "adam:lr=0.05", 16, /*min_trainers=*/2);
    for (int i = 0; i < processes; ++i) StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, static_cast<size_t>(pservers)));
    // Backups in place before training starts, so the kill meets a replicated job.
    std::atomic<int> done_steps{0};
    std::atomic<bool> failed{false};
    std::vector<std::vector<float>> w(2, std::vector<float>(kReplicaDim));
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
        for (int j = 0; j < kReplicaDim; ++j) w[t][j] = InitialWeight(j);
        if (!client->AddDense("w", w[t].data(), kReplicaDim).ok() || !client->Initialize().ok() ||
            !client->Pull().Wait().ok()) {
          ADD_FAILURE() << "trainer " << t << " did not start";
          failed = true;
          return;
        }
        ++ready;
        while (!go && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int s = 0; s < steps_ && !failed; ++s) {
          if (pace_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pace_ms_));
          std::vector<float> g(kReplicaDim, 0.0f);
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
    if (replicas_ > 1) {
      EXPECT_TRUE(WaitUntil([&] { return FullyReplicated(client_.get(), job); }, std::chrono::seconds(60)));
    }
    go = true;
    Run run;
    if (during) during(done_steps, &run);
    for (auto& t : trainers)
      if (t.joinable()) t.join();
    {
      // The longest wait for a step after `run.since` (when `during` set it).
      std::lock_guard<std::mutex> lock(times_mu);
      auto last = run.since;
      for (auto t : step_done) {
        if (run.since == std::chrono::steady_clock::time_point() || t < run.since) continue;
        run.stall = std::max(run.stall, std::chrono::duration<double>(t - last).count());
        last = t;
      }
    }
    for (auto& t : trainers)
      if (t.joinable()) t.join();
    EXPECT_FALSE(failed);
    EXPECT_EQ(std::memcmp(w[0].data(), w[1].data(), kReplicaDim * sizeof(float)), 0)
        << "the trainers disagree";
    run.w = w[0];
    procs_.clear();
    return run;
  }
};

TEST_F(ReplicaTest, APserverKilledAtARandomStepLosesNothingAndRollsNothingBack) {
  replicas_ = 2;
  const Run clean = Train("clean", 3, 3, nullptr);
  ASSERT_FALSE(HasFailure());
  std::mt19937 rng(std::random_device{}());
  for (int run = 0; run < 3; ++run) {
    const int kill_at = 3 + static_cast<int>(rng() % (steps_ - 8));
    const int victim = static_cast<int>(rng() % 3);
    SCOPED_TRACE("run " + std::to_string(run) + ": host " + std::to_string(victim) + " killed after step " +
                 std::to_string(kill_at));
    const std::string job = "kill" + std::to_string(run);
    const Run r = Train(
        job, 3, 3, [&](const std::atomic<int>& done, Run* out) { KillAt(job, done, out, kill_at, victim); });
    ASSERT_FALSE(HasFailure());
    size_t differ = 0;
    for (int j = 0; j < kReplicaDim; ++j) differ += std::memcmp(&r.w[j], &clean.w[j], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << differ << " of " << kReplicaDim
                          << " parameters differ from the run without the failure";
    std::printf(
        "replica run %d: host %d killed after step %d; the longest wait for a step after it %.3f s "
        "(lease TTL 2 s)\n",
        run, victim, kill_at, r.stall);
  }
}

// How many primaries each live host holds, by host index (from the replica map).
std::map<int, int> PrimariesPerHost(etcd::EtcdClient* etcd, const std::string& job) {
  std::map<int, int> out;
  auto kv = etcd->Get(keys::ReplicaMap(job));
  if (!kv.ok() || kv->kvs.empty()) return out;
  auto m = ReplicaMap::FromJson(kv->kvs[0].value);
  if (!m.ok()) return out;
  for (int s = 0; s < m->slots(); ++s) ++out[m->PrimaryOf(s)];
  return out;
}

// Elastic pservers: a sync job of 4 shards starts on 2 pserver processes, grows to 4 while it
// trains (two shards move, each copied live and handed over), then shrinks to 3 (SIGTERM: the
// leaving process hands its shard over, then exits 0). Its final parameters are bit for bit
// those of the same training on a plain job with 2 pservers.
TEST_F(ReplicaTest, PserversScaledTwoToFourToThreeEndBitForBitLikeAFixedTwo) {
  steps_ = 40;
  pace_ms_ = 40;
  const Run fixed = Train("fixed", 2, 2, nullptr);
  ASSERT_FALSE(HasFailure());
  initial_pservers_ = 2;
  const std::string job = "elastic";
  const Run elastic = Train(job, 4, 2, [&](const std::atomic<int>& done, Run*) {
    ASSERT_TRUE(
        WaitUntil([&] { return done.load() >= 8; }, std::chrono::seconds(60), std::chrono::milliseconds(1)));
    StartPserver(job);
    StartPserver(job);
    ASSERT_TRUE(WaitUntil(
        [&] {
          return PrimariesPerHost(client_.get(), job) == std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}};
        },
        std::chrono::seconds(60), std::chrono::milliseconds(5)));
    std::printf("elastic: 4 pservers serve one shard each after step %d\n", done.load());
    ASSERT_TRUE(
        WaitUntil([&] { return done.load() >= 22; }, std::chrono::seconds(60), std::chrono::milliseconds(1)));
    const int64_t pid = HostPid(client_.get(), job, 3);
    ASSERT_GT(pid, 0);
    for (auto& p : procs_) {
      if (p->pid() != pid) continue;
      auto code = p->Terminate(std::chrono::seconds(60));
      ASSERT_TRUE(code.has_value());
      EXPECT_EQ(*code, 0) << "the leaving pserver exits cleanly";
    }
    auto per_host = PrimariesPerHost(client_.get(), job);
    EXPECT_EQ(per_host.count(3), 0u) << "host 3 left with no shard";
    int total = 0;
    for (auto [h, n] : per_host) total += n;
    EXPECT_EQ(total, 4);
    std::printf("elastic: host 3 left after step %d\n", done.load());
  });
  ASSERT_FALSE(HasFailure());
  size_t differ = 0;
  for (int j = 0; j < kReplicaDim; ++j) differ += std::memcmp(&elastic.w[j], &fixed.w[j], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << differ << " of " << kReplicaDim
                        << " parameters differ from the run on a fixed 2 pservers";
}

// A pserver of a replicated or elastic job stops on SIGTERM even when etcd is gone (it used to
// retry reading the replica map forever, at full speed).
TEST_F(ReplicaTest, SigtermStopsAHostWhoseEtcdIsGone) {
  initial_pservers_ = 1;
  MakeJob("gone", 1, "sync", "sgd:lr=0.1", 16);
  const size_t ps = StartPserver("gone");
  ASSERT_TRUE(WaitForPservers("gone", 1));
  ASSERT_TRUE(server_->Kill().ok());
  auto code = procs_[ps]->Terminate(std::chrono::seconds(60));
  EXPECT_TRUE(code.has_value()) << "still running 60 s after SIGTERM:\n" << procs_[ps]->Output();
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
