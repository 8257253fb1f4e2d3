// Election against a real etcd with real processes: kill -9 the leader and a standby takes over
// within TTL + 1 s; the deposed leader's fence no longer works; a leader stalled past its TTL
// (SIGSTOP) that wakes up (SIGCONT) cannot write.
#include "coord/election.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include "common/files.h"
#include "coord/etcd_fixture.h"
#include "coord/lease_keeper.h"
#include "harness/subprocess.h"

namespace tessera::testing {
namespace {

const std::string kPrefix = "/tessera/e/master/election/";
const std::string kFenced = "/tessera/e/master/state/owner";

class ElectionTest : public EtcdTest {
 protected:
  void SetUp() override {
    EtcdTest::SetUp();
    auto d = MakeTempDir("election-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override {
    procs_.clear();
    (void)RemoveAll(dir_);
  }
  void StartCandidates(int n, int64_t ttl) {
    for (int i = 0; i < n; ++i) {
      SpawnOptions o;
      o.argv = {BuildPath("tests/coord_probe"),
                "campaign",
                "--etcd",
                server_->endpoint(),
                "--prefix",
                kPrefix,
                "--ttl",
                std::to_string(ttl),
                "--name",
                "c" + std::to_string(i),
                "--fenced-key",
                kFenced};
      o.log_path = dir_ + "/c" + std::to_string(i) + ".log";
      auto p = Subprocess::Spawn(o);
      ASSERT_TRUE(p.ok()) << p.status();
      procs_.push_back(std::move(*p));
    }
  }
  // Index of the one candidate that says LEADER, or -1 (fails the test if two do).
  int Leader() {
    int leader = -1;
    for (size_t i = 0; i < procs_.size(); ++i) {
      if (!procs_[i]->running()) continue;
      if (procs_[i]->Output().find("LEADER") != std::string::npos) {
        EXPECT_EQ(leader, -1) << "two live leaders";
        leader = static_cast<int>(i);
      }
    }
    return leader;
  }
  Fence FenceOf(int i) {
    std::string out = procs_[i]->Output();
    size_t at = out.find("LEADER ");
    std::istringstream in(out.substr(at + 7));
    Fence f;
    in >> f.key >> f.revision;
    return f;
  }
  std::string dir_;
  std::vector<std::unique_ptr<Subprocess>> procs_;
};

TEST_F(ElectionTest, StandbyLeadsOnceTheKilledLeadersTtlRunsOutAndOldFenceFails) {
  const int64_t kTtl = 2;
  StartCandidates(3, kTtl);
  int first = -1;
  ASSERT_TRUE(WaitUntil([&] { return (first = Leader()) >= 0; }, std::chrono::seconds(30)));
  // The leader writes under its fence.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = client_->Get(kFenced);
        return r.ok() && !r->kvs.empty() && r->kvs[0].value == "c" + std::to_string(first);
      },
      std::chrono::seconds(10)));
  Fence old_fence = FenceOf(first);
  ASSERT_TRUE(old_fence.valid());

  procs_[first]->Kill();
  auto killed = std::chrono::steady_clock::now();
  int second = -1;
  ASSERT_TRUE(WaitUntil([&] { return (second = Leader()) >= 0; }, std::chrono::seconds(15)));
  double took = SecondsSince(killed);
  EXPECT_NE(second, first);
  std::printf("standby led %.2f s after the leader was killed (TTL %lld s)\n", took,
              static_cast<long long>(kTtl));
  EXPECT_LE(took, kTtl + 5.0) << "the lease's expiry hands over, not much later; took " << took << " s";

  // The deposed leader's fence no longer lets anything through.
  etcd::Txn txn;
  txn.success.push_back(etcd::Op::Put(kFenced, "zombie"));
  auto r = Election::FencedCommit(client_.get(), old_fence, txn);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(WaitUntil([&] { return client_->Get(kFenced)->kvs[0].value == "c" + std::to_string(second); },
                        std::chrono::seconds(10)));
  EXPECT_NE(client_->Get(kFenced)->kvs[0].value, "zombie");
  // The new leader is what Leader() reports.
  auto leader = Election::Leader(client_.get(), kPrefix);
  ASSERT_TRUE(leader.ok());
  ASSERT_TRUE(leader->has_value());
  EXPECT_EQ((*leader)->value, "c" + std::to_string(second));
}

TEST_F(ElectionTest, StalledLeaderThatWakesUpCannotWrite) {
  const int64_t kTtl = 2;
  StartCandidates(2, kTtl);
  int first = -1;
  ASSERT_TRUE(WaitUntil([&] { return (first = Leader()) >= 0; }, std::chrono::seconds(30)));
  ASSERT_TRUE(procs_[first]->Signal(SIGSTOP).ok());
  int other = 1 - first;
  ASSERT_TRUE(WaitUntil([&] { return procs_[other]->Output().find("LEADER") != std::string::npos; },
                        std::chrono::seconds(15)));
  ASSERT_TRUE(procs_[first]->Signal(SIGCONT).ok());
  // The woken leader's next fenced write fails and it exits.
  ASSERT_TRUE(procs_[first]->WaitForOutput("FENCED_WRITE_FAILED", std::chrono::seconds(15)))
      << procs_[first]->Output();
  auto code = procs_[first]->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 4);
  // From then on only the new leader's name is written.
  ASSERT_TRUE(WaitUntil([&] { return client_->Get(kFenced)->kvs[0].value == "c" + std::to_string(other); },
                        std::chrono::seconds(10)));
}

TEST_F(EtcdTest, CampaignIsCancellableAndResignHandsOver) {
  auto l1 = LeaseKeeper::Start(client_.get(), {10, {}});
  auto l2 = LeaseKeeper::Start(client_.get(), {10, {}});
  ASSERT_TRUE(l1.ok() && l2.ok());
  Election a(client_.get(), kPrefix, (*l1)->id());
  Election b(client_.get(), kPrefix, (*l2)->id());
  ASSERT_TRUE(a.Campaign("a").ok());
  std::atomic<bool> stop{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  EXPECT_EQ(b.Campaign("b", [&] { return stop.load(); }).code(), StatusCode::kCancelled);
  canceller.join();

  std::atomic<bool> b_leads{false};
  std::thread campaigner([&] { b_leads = b.Campaign("b").ok(); });
  ASSERT_TRUE(a.Resign().ok());
  campaigner.join();
  EXPECT_TRUE(b_leads);
  EXPECT_EQ((*Election::Leader(client_.get(), kPrefix))->value, "b");
  etcd::Txn txn;
  txn.success.push_back(etcd::Op::Put("/x", "a"));
  EXPECT_EQ(a.FencedCommit(txn).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(b.FencedCommit(txn).ok());
}

}  // namespace
}  // namespace tessera::testing
