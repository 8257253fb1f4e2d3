// ViewShards, DiffMaps and ReplicaHistory on maps made by ReplicaMap's own decisions: what a
// shard's state is while a host is gone, copies are missing or a primary moves, and which
// changes a new map brings.
#include "job/replica_view.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tessera {
namespace {

std::vector<std::string> States(const std::vector<ShardView>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.state);
  return out;
}

TEST(ReplicaViewTest, ShardsAreOkFailingOverCopyingOrUnderReplicated) {
  auto m = ReplicaMap::Place(3, 3, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  auto all = ViewShards(*m, {0, 1, 2}, {}, /*elastic=*/false);
  EXPECT_EQ(States(all), std::vector<std::string>(3, "ok"));
  EXPECT_EQ(all[1].primary, 1);
  EXPECT_EQ(all[1].backups.size(), 1u);
  // Host 2 is gone; the map still names it.
  for (const auto& s : ViewShards(*m, {0, 1}, {}, /*elastic=*/false)) {
    const auto& h = m->HoldersOf(s.shard);
    EXPECT_EQ(s.state, std::find(h.begin(), h.end(), 2) != h.end() ? "failing over" : "ok") << s.shard;
  }
  // Failed over: the shards it held have one copy; a live spare host gets the missing copies.
  auto f = m->FailOver(2);
  ASSERT_TRUE(f.ok()) << f.status();
  auto two = ViewShards(*f, {0, 1}, {}, /*elastic=*/false);
  for (const auto& s : two) {
    EXPECT_EQ(s.state, f->HoldersOf(s.shard).size() < 2 ? "copying" : "ok") << s.shard;
  }
  // Copied again onto the two hosts left, then one of them lost too: nowhere for a second copy.
  auto r = f->WithCopies(f->RestorePlan({0, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(States(ViewShards(*r, {0, 1}, {}, /*elastic=*/false)), std::vector<std::string>(3, "ok"));
  // Host 2 back and holding nothing: a fixed job leaves the shards where they are; an elastic
  // one moves a primary to it.
  EXPECT_EQ(States(ViewShards(*r, {0, 1, 2}, {}, /*elastic=*/false)), std::vector<std::string>(3, "ok"));
  const auto elastic = ViewShards(*r, {0, 1, 2}, {}, /*elastic=*/true);
  EXPECT_TRUE(std::any_of(elastic.begin(), elastic.end(),
                          [](const ShardView& v) { return v.state == "moving" && v.moving_to == 2; }));
  auto g = r->FailOver(1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(States(ViewShards(*g, {0}, {}, /*elastic=*/false)),
            std::vector<std::string>(3, "under-replicated"));
}

TEST(ReplicaViewTest, AnElasticJobsShardsMoveToNewHostsAndOffLeavingOnes) {
  auto m = ReplicaMap::PrimariesOnly(4, 4, 1, 2);  // 4 shards on hosts 0 and 1
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(States(ViewShards(*m, {0, 1}, {}, /*elastic=*/true)), std::vector<std::string>(4, "ok"));
  auto grown = ViewShards(*m, {0, 1, 2, 3}, {}, /*elastic=*/true);
  std::set<int> to;
  for (const auto& s : grown) {
    if (s.state == "moving") to.insert(s.moving_to);
  }
  EXPECT_EQ(to, (std::set<int>{2, 3}));
  // Host 1 leaving: its shards move to host 0.
  for (const auto& s : ViewShards(*m, {0, 1}, {1}, /*elastic=*/true)) {
    if (s.primary == 1) {
      EXPECT_EQ(s.state, "moving");
      EXPECT_EQ(s.moving_to, 0);
    } else {
      EXPECT_EQ(s.state, "ok");
    }
  }
}

TEST(ReplicaViewTest, DiffNamesFailoversHandoversCopiesAndDrops) {
  auto m = ReplicaMap::Place(3, 3, 2);
  ASSERT_TRUE(m.ok());
  auto f = m->FailOver(2);
  ASSERT_TRUE(f.ok());
  int failovers = 0, dropped = 0;
  for (const auto& c : DiffMaps(*m, *f, {0, 1})) {
    EXPECT_EQ(c.epoch, f->epoch());
    if (c.kind == "failover") {
      ++failovers;
      EXPECT_EQ(c.from, 2);
      EXPECT_EQ(c.to, f->PrimaryOf(c.shard));
    } else {
      ASSERT_EQ(c.kind, "dropped");
      ++dropped;
      EXPECT_EQ(c.from, 2);
    }
  }
  EXPECT_EQ(failovers, static_cast<int>(m->PrimarySlotsOf(2).size()));
  EXPECT_EQ(dropped, static_cast<int>(m->BackupSlotsOf(2).size()));
  // Copies restored.
  auto r = f->WithCopies(f->RestorePlan({0, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  auto copies = DiffMaps(*f, *r, {0, 1});
  ASSERT_FALSE(copies.empty());
  for (const auto& c : copies) EXPECT_EQ(c.kind, "copy");
  // A primary handed over to a live host.
  auto e = ReplicaMap::PrimariesOnly(2, 2, 1, 1);
  ASSERT_TRUE(e.ok());
  auto h = e->Handover(1, 1);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(DiffMaps(*e, *h, {0, 1}), (std::vector<ShardChange>{{1, "handover", 0, 1, h->epoch(), 0}}));
}

TEST(ReplicaViewTest, HostsComeFromTheirRegistrationsLeavingOnesMarked) {
  auto h = ParseHosts({{"0", R"({"address":"a"})"}, {"2", R"({"leaving":true})"}, {"x", "{}"}, {"3", "not json"}});
  EXPECT_EQ(h.live, (std::set<int>{0, 2, 3}));
  EXPECT_EQ(h.leaving, (std::set<int>{2}));
  EXPECT_EQ(h.values.at(0), R"({"address":"a"})");
}

TEST(ReplicaViewTest, HistoryKeepsTheChangesOfNewerMapsOnly) {
  auto m = ReplicaMap::Place(3, 3, 2);
  ASSERT_TRUE(m.ok());
  ReplicaHistory history(4);
  history.Observe(*m, {0, 1, 2}, 1);
  EXPECT_TRUE(history.changes().empty()) << "the first map is the baseline";
  auto f = m->FailOver(2);
  ASSERT_TRUE(f.ok());
  history.Observe(*f, {0, 1}, 2);
  history.Observe(*f, {0, 1}, 3);  // seen again
  history.Observe(*m, {0, 1}, 4);  // an older map read late
  EXPECT_EQ(history.failovers(), static_cast<int64_t>(m->PrimarySlotsOf(2).size()));
  EXPECT_EQ(history.changes().size(), std::min<size_t>(4, DiffMaps(*m, *f, {0, 1}).size()));
  for (const auto& c : history.changes()) EXPECT_EQ(c.at_ms, 2);
  auto r = f->WithCopies(f->RestorePlan({0, 1}));
  ASSERT_TRUE(r.ok());
  history.Observe(*r, {0, 1}, 5);
  EXPECT_EQ(history.changes().size(), 4u) << "bounded";
  EXPECT_EQ(history.changes().back().kind, "copy");
}

}  // namespace
}  // namespace tessera
