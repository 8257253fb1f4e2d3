// Registry against a real etcd: index claims by concurrent processes, re-claim after a SIGKILL,
// named registration, and the member watch.
#include "coord/registry.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

#include "common/files.h"
#include "common/strings.h"
#include "coord/etcd_fixture.h"
#include "coord/lease_keeper.h"
#include "harness/metrics_scrape.h"
#include "harness/subprocess.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

TEST_F(EtcdTest, EightConcurrentClaimersOfFourIndicesThenReclaimAfterKill) {
  const std::string prefix = "/tessera/claims/pservers/";
  const int64_t kTtl = 2;
  auto dir = MakeTempDir("claim-test-");
  ASSERT_TRUE(dir.ok());
  std::vector<std::unique_ptr<Subprocess>> procs;
  for (int i = 0; i < 8; ++i) {
    SpawnOptions o;
    o.argv = {BuildPath("tests/coord_probe"),
              "claim",
              "--etcd",
              server_->endpoint(),
              "--prefix",
              prefix,
              "--n",
              "4",
              "--ttl",
              std::to_string(kTtl)};
    o.log_path = *dir + "/claimer" + std::to_string(i) + ".log";
    auto p = Subprocess::Spawn(o);
    ASSERT_TRUE(p.ok()) << p.status();
    procs.push_back(std::move(*p));
  }
  std::map<int, int> holder;  // index -> process
  int refused = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto out = procs[i]->Output();
          return out.find("CLAIMED") != std::string::npos || out.find("NO_FREE_INDEX") != std::string::npos ||
                 out.find("ERROR") != std::string::npos;
        },
        std::chrono::seconds(30)))
        << "claimer " << i << " said: " << procs[i]->Output();
    std::string out = procs[i]->Output();
    ASSERT_EQ(out.find("ERROR"), std::string::npos) << out;
    size_t at = out.find("CLAIMED ");
    if (at == std::string::npos) {
      ++refused;
      continue;
    }
    int index = std::stoi(out.substr(at + 8));
    EXPECT_EQ(holder.count(index), 0u) << "index " << index << " claimed twice";
    holder[index] = i;
  }
  EXPECT_EQ(holder.size(), 4u);
  EXPECT_EQ(refused, 4);
  for (int idx = 0; idx < 4; ++idx) EXPECT_EQ(holder.count(idx), 1u) << idx;

  // Kill the holder of index 2; the index stays taken until its lease expires, then is free.
  Registry reg(client_.get(), prefix);
  auto keeper = LeaseKeeper::Start(client_.get(), {kTtl, {}});
  ASSERT_TRUE(keeper.ok());
  procs[holder[2]]->Kill();
  auto killed = std::chrono::steady_clock::now();
  auto early = reg.ClaimIndex(4, "me", (*keeper)->id());
  EXPECT_EQ(early.status().code(), StatusCode::kResourceExhausted) << "claimable before the TTL passed";
  StatusOr<Claim> claim = Status::Unavailable("not yet");
  ASSERT_TRUE(WaitUntil(
      [&] {
        claim = reg.ClaimIndex(4, "me", (*keeper)->id());
        return claim.ok();
      },
      std::chrono::seconds(15), std::chrono::milliseconds(100)));
  EXPECT_EQ(claim->index, 2);
  std::printf("index claimable %.2f s after its holder died (TTL %lld s)\n", SecondsSince(killed),
              static_cast<long long>(kTtl));
  EXPECT_LE(SecondsSince(killed), kTtl + 5.0) << "freed by the lease's expiry, not much later";
  auto list = reg.List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->members.size(), 4u);
  const Member* mine = list->Find("2");
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->epoch, claim->epoch);
  EXPECT_EQ(mine->value, "me");
  procs.clear();
  ASSERT_TRUE(RemoveAll(*dir).ok());
}

TEST_F(EtcdTest, RegisterIsIdempotentForItsOwnLeaseAndRefusesOthers) {
  auto a = client_->GrantLease(10);
  auto b = client_->GrantLease(10);
  ASSERT_TRUE(a.ok() && b.ok());
  Registry reg(client_.get(), "/tessera/j/trainers/");
  auto e1 = reg.Register("t1", "{\"addr\":\"x\"}", a->id);
  ASSERT_TRUE(e1.ok()) << e1.status();
  auto again = reg.Register("t1", "{\"addr\":\"x\"}", a->id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *e1);
  auto taken = reg.Register("t1", "{}", b->id);
  EXPECT_EQ(taken.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(taken.status().message().find("t1"), std::string::npos);

  ASSERT_TRUE(reg.Update("t1", "{\"addr\":\"y\"}", *e1, a->id).ok());
  EXPECT_EQ(reg.List()->Find("t1")->value, "{\"addr\":\"y\"}");
  EXPECT_EQ(reg.Update("t1", "{}", *e1 + 1000, a->id).code(), StatusCode::kFailedPrecondition);

  // A stale owner (wrong epoch) cannot deregister the current member.
  ASSERT_TRUE(reg.Deregister("t1", *e1 + 1000).ok());
  EXPECT_NE(reg.List()->Find("t1"), nullptr);
  ASSERT_TRUE(reg.Deregister("t1", *e1).ok());
  EXPECT_EQ(reg.List()->Find("t1"), nullptr);
  // A new registration of the same name gets a new, larger epoch.
  auto e2 = reg.Register("t1", "{}", b->id);
  ASSERT_TRUE(e2.ok());
  EXPECT_GT(*e2, *e1);
}

TEST_F(EtcdTest, ClaimIndexTakesTheLowestFreeIndex) {
  auto lease = client_->GrantLease(10);
  ASSERT_TRUE(lease.ok());
  Registry reg(client_.get(), "/tessera/j/pservers/");
  // Pre-occupy 0 and 2 with other leases.
  ASSERT_TRUE(client_->Put("/tessera/j/pservers/0", "other").ok());
  ASSERT_TRUE(client_->Put("/tessera/j/pservers/2", "other").ok());
  auto c = reg.ClaimIndex(4, "me", lease->id);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index, 1);
  // Claiming again with the same lease returns a new free index (3) but releases the extra one,
  // so a lease never holds two indices.
  auto again = reg.ClaimIndex(4, "me", lease->id);
  ASSERT_TRUE(again.ok());
  auto list = reg.List();
  int mine = 0;
  for (const auto& m : list->members) mine += m.lease == lease->id;
  EXPECT_EQ(mine, 1);
  EXPECT_EQ(reg.ClaimIndex(0, "me", lease->id).status().code(), StatusCode::kInvalidArgument);
}

TEST(LowestFreeIndicesTest, SkipsTakenAndNonNumericNames) {
  auto list_of = [](std::vector<std::string> names) {
    MemberList l;
    for (auto& n : names) l.members.push_back(Member{n, "/p/" + n, "", 1, 1});
    return l;
  };
  struct Case {
    std::vector<std::string> taken;
    int count;
    std::vector<int> expected;
  } cases[] = {
      {{}, 3, {0, 1, 2}},
      {{"0", "1"}, 2, {2, 3}},
      {{"0", "2", "5"}, 4, {1, 3, 4, 6}},
      {{"trainer-a", "1"}, 3, {0, 2, 3}},
      {{"3"}, 0, {}},
  };
  for (const auto& c : cases) EXPECT_EQ(LowestFreeIndices(list_of(c.taken), c.count), c.expected);
}

TEST_F(EtcdTest, ClaimLowestFreeGivesTwelveRacingClaimersDistinctLowestIds) {
  const std::string prefix = "/tessera/j/trainers/";
  ASSERT_TRUE(client_->Put(prefix + "1", "other").ok());  // a gap at 0, then 1 taken
  std::vector<std::unique_ptr<LeaseKeeper>> keepers;
  for (int i = 0; i < 12; ++i) {
    auto k = LeaseKeeper::Start(client_.get(), {10, {}});
    ASSERT_TRUE(k.ok()) << k.status();
    keepers.push_back(std::move(*k));
  }
  std::vector<StatusOr<Claim>> claims(12, Status::Unknown(""));
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back([&, i] {
      Registry reg(client_.get(), prefix);
      claims[i] = reg.ClaimLowestFree("claimer " + std::to_string(i), keepers[i]->id());
    });
  }
  for (auto& t : threads) t.join();
  std::set<int> got;
  for (const auto& c : claims) {
    ASSERT_TRUE(c.ok()) << c.status();
    got.insert(c->index);
  }
  // Twelve different ids: the first race's winners take the lowest free ones (0 and 2..8), the
  // others spread over a window of 32 free ones (ClaimCandidates). The window starts above what the
  // loser believed taken: the 13 keys at most and its own 8 lost candidates. A claimer that listed
  // the members late (0 and 2 taken, say) loses 3..10 and draws from 11..42, so the highest id is
  // at most 13 + 8 + 32 - 1 = 52 (a bound of 24, which assumed every claimer listed the members at
  // one moment, failed in CI).
  EXPECT_EQ(got.size(), 12u);
  for (int low : {0, 2, 3, 4, 5, 6, 7, 8}) EXPECT_EQ(got.count(low), 1u) << low;
  EXPECT_LE(*got.rbegin(), 52);
  auto list = Registry(client_.get(), prefix).List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->members.size(), 13u) << "a claimer holds more than one id";
}

TEST(ClaimCandidatesTest, AloneTheLowestInOrderAfterLostRacesSpreadOverAGrowingWindow) {
  MemberList list;
  for (int taken : {1, 3}) list.members.push_back(Member{std::to_string(taken), "", "", 1, 1});
  EXPECT_EQ(ClaimCandidates(list, 0, 4, 7), (std::vector<int>{0, 2, 4, 5}));
  for (int attempt = 1; attempt <= 12; ++attempt) {
    const std::vector<int> window = LowestFreeIndices(list, 4 << std::min(2 * attempt, 10));
    std::set<int> seen;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      const std::vector<int> c = ClaimCandidates(list, attempt, 4, seed);
      ASSERT_EQ(c.size(), 4u);
      EXPECT_EQ(std::set<int>(c.begin(), c.end()).size(), 4u) << "distinct";
      for (int i : c) {
        EXPECT_TRUE(std::find(window.begin(), window.end(), i) != window.end()) << i << " outside the window";
        seen.insert(i);
      }
    }
    if (attempt <= 2) {  // (800 draws see every one of 64, not of 256)
      EXPECT_EQ(seen.size(), window.size()) << "claimers spread over the whole window";
    }
  }
  EXPECT_NE(ClaimCandidates(list, 3, 4, 1), ClaimCandidates(list, 3, 4, 2));
}

// Why a race of twelve can end above 24: a claimer that listed the members when only 0..2 were
// taken tries 3..10, loses them all to earlier claimers, and draws its second round from the 32
// free ids above them in its own view, 11..42.
TEST(ClaimCandidatesTest, ALateListersSecondRoundDrawsAboveItsStaleView) {
  MemberList list;
  for (int taken = 0; taken <= 10; ++taken)
    list.members.push_back(Member{std::to_string(taken), "", "", 1, 1});
  std::set<int> seen;
  for (uint64_t seed = 0; seed < 200; ++seed)
    for (int i : ClaimCandidates(list, 1, 8, seed)) seen.insert(i);
  EXPECT_EQ(*seen.begin(), 11);
  EXPECT_EQ(*seen.rbegin(), 42);
}

// A join storm: 300 claimers racing at once all get distinct ids. (Each trying the same 8
// lowest free ones, 8 won a round and the rest started over: 300 needed 38 rounds, and a claimer
// gave up after 20.)
TEST_F(EtcdTest, ClaimLowestFreeSettlesAStormOfThreeHundredClaimers) {
  const std::string prefix = "/tessera/j/trainers/";
  constexpr int kClaimers = 300;
  std::vector<int64_t> leases;
  for (int i = 0; i < kClaimers; ++i) {
    auto l = client_->GrantLease(60);
    ASSERT_TRUE(l.ok()) << l.status();
    leases.push_back(l->id);
  }
  // etcd's count of range requests: each one a read of every member, until the storm settles.
  const std::string metrics = "http://" + server_->endpoint() + "/metrics";
  auto ranges = [&] {
    const double n = ScrapeMetric(metrics, "grpc_server_handled_total",
                                  {{"grpc_code", "OK"},
                                   {"grpc_method", "Range"},
                                   {"grpc_service", "etcdserverpb.KV"},
                                   {"grpc_type", "unary"}});
    return std::isnan(n) ? 0.0 : n;
  };
  const double ranges_before = ranges();
  std::vector<StatusOr<Claim>> claims;
  for (int i = 0; i < kClaimers; ++i) claims.emplace_back(Status::Unknown(""));
  std::vector<std::thread> threads;
  for (int i = 0; i < kClaimers; ++i)
    threads.emplace_back(
        [&, i] { claims[i] = Registry(client_.get(), prefix).ClaimLowestFree("c", leases[i]); });
  for (auto& t : threads) t.join();
  // A claimer lists the members once, and again only after every few lost rounds (it once did
  // twice a round, which made a storm of N claimers read O(N^2 log N) keys).
  const double per_claimer = (ranges() - ranges_before) / kClaimers;
  std::printf("%.2f member lists per claimer\n", per_claimer);
  EXPECT_LT(per_claimer, 2.0);
  std::set<int> got;
  for (const auto& c : claims) {
    ASSERT_TRUE(c.ok()) << c.status();
    got.insert(c->index);
  }
  EXPECT_EQ(got.size(), static_cast<size_t>(kClaimers));
  auto list = Registry(client_.get(), prefix).List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->members.size(), static_cast<size_t>(kClaimers)) << "a claimer holds more than one id";
}

TEST_F(EtcdTest, MemberWatchSeesJoinsAndLeavesWithEpochs) {
  Registry reg(client_.get(), "/tessera/j/trainers/");
  std::mutex mu;
  std::vector<size_t> sizes;
  auto watch = reg.Watch([&](const MemberList& l) {
    std::lock_guard<std::mutex> lock(mu);
    sizes.push_back(l.members.size());
  });
  ASSERT_TRUE(watch->WaitFor([](const MemberList& l) { return l.revision > 0; }, std::chrono::seconds(10)));
  auto lease = client_->GrantLease(10);
  ASSERT_TRUE(lease.ok());
  auto e1 = reg.Register("a", "1", lease->id);
  auto e2 = reg.Register("b", "2", lease->id);
  ASSERT_TRUE(e1.ok() && e2.ok());
  ASSERT_TRUE(
      watch->WaitFor([](const MemberList& l) { return l.members.size() == 2; }, std::chrono::seconds(10)));
  auto snap = watch->Snapshot();
  EXPECT_EQ(snap.Find("a")->epoch, *e1);
  EXPECT_EQ(snap.Find("b")->epoch, *e2);
  // Nested keys under the prefix are not members.
  ASSERT_TRUE(client_->Put("/tessera/j/trainers/a/extra", "x").ok());
  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  ASSERT_TRUE(
      watch->WaitFor([](const MemberList& l) { return l.members.empty(); }, std::chrono::seconds(10)));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(sizes.front(), 0u);
}

// WatchChanges hands its callback what changed, in order (the whole list only when it was read
// whole), and its members' epochs followed that way agree with the list kept beside them, across
// joins, a value replaced, a rejoin with a new epoch, leaves and many members at once.
TEST_F(EtcdTest, MemberWatchChangesCarryEachJoinAndLeaveOnce) {
  Registry reg(client_.get(), "/tessera/j/trainers/");
  std::mutex mu;
  MemberEpochs epochs;
  std::vector<std::string> left;
  int relists = 0;
  size_t most_in_a_call = 0;
  auto watch = reg.WatchChanges([&](const MemberChanges& c) {
    std::lock_guard<std::mutex> lock(mu);
    relists += c.relisted;
    if (!c.relisted) most_in_a_call = std::max(most_in_a_call, c.changes.size());
    for (const auto& l : epochs.Apply(c)) left.push_back(l.name + "@" + std::to_string(l.epoch));
  });
  auto lease = client_->GrantLease(30);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(watch->WaitFor([](const MemberList& l) { return l.revision > 0; }, std::chrono::seconds(10)));
  auto a = reg.Register("a", "1", lease->id);
  ASSERT_TRUE(a.ok()) << a.status();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(reg.Register(std::to_string(i), "{}", lease->id).ok()) << i;
  ASSERT_TRUE(client_->Put("/tessera/j/trainers/a", "2", lease->id).ok());  // same key: same epoch
  ASSERT_TRUE(client_->Delete("/tessera/j/trainers/7").ok());
  auto again = reg.Register("7", "{}", lease->id);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(client_->Put("/tessera/j/trainers/a/extra", "x").ok());  // nested: not a member
  auto followed = [&](size_t n) {  // the callback has seen what the list holds (it runs after)
    return WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return epochs.size() == n && epochs.EpochOf("7") == (n ? *again : 0);
        },
        std::chrono::seconds(10));
  };
  ASSERT_TRUE(followed(201));
  auto snap = watch->Snapshot();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(relists, 1);
    EXPECT_LT(most_in_a_call, 201u) << "a change's call carries the change, not the list";
    ASSERT_EQ(epochs.size(), snap.members.size());
    for (const auto& m : snap.members) EXPECT_EQ(epochs.EpochOf(m.name), m.epoch) << m.name;
    EXPECT_EQ(epochs.EpochOf("a"), *a);
    EXPECT_EQ(epochs.EpochOf("7"), *again);
    std::vector<std::string> want = {"7@" + std::to_string(snap.Find("6")->epoch + 1)};
    EXPECT_EQ(left, want) << "member 7 left once, with the epoch it first had";
  }
  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  ASSERT_TRUE(followed(0));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(left.size(), 1u + 201u) << "each member leaves once more when the lease goes";
}

}  // namespace
}  // namespace tessera::testing
