// ReplicaMap, exhaustively over small jobs: placement (distinct, balanced, spread), failover of
// every pserver (no copy lost while another exists, backups promoted in order, fenced by the
// epoch), restoring the copies afterwards, and the JSON record refusing what cannot be right.
#include "job/replica_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace tessera {
namespace {

// Copies each pserver holds.
std::vector<int> Load(const ReplicaMap& m) {
  std::vector<int> load(m.pservers(), 0);
  for (int s = 0; s < m.slots(); ++s)
    for (int p : m.HoldersOf(s)) ++load[p];
  return load;
}

int Spread(const std::vector<int>& v) {
  return *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
}

TEST(ReplicaMapTest, PlacementPutsEveryCopyOnADistinctPserverAndSpreadsThemEvenly) {
  for (int p = 1; p <= 8; ++p) {
    for (int r = 1; r <= p; ++r) {
      for (int slots : {p, 64, 1024}) {
        auto m = ReplicaMap::Place(slots, p, r);
        ASSERT_TRUE(m.ok()) << m.status();
        SCOPED_TRACE("P=" + std::to_string(p) + " R=" + std::to_string(r) + " S=" + std::to_string(slots));
        ASSERT_TRUE(m->Validate().ok()) << m->Validate();
        std::vector<int> primaries(p, 0);
        for (int s = 0; s < slots; ++s) {
          const auto& h = m->HoldersOf(s);
          ASSERT_EQ(static_cast<int>(h.size()), r);
          EXPECT_EQ(std::set<int>(h.begin(), h.end()).size(), h.size()) << "slot " << s;
          ++primaries[m->PrimaryOf(s)];
        }
        EXPECT_LE(Spread(primaries), 1);
        EXPECT_LE(Spread(Load(*m)), r) << "copies per pserver";
        EXPECT_TRUE(m->UnderReplicated().empty());
        EXPECT_EQ(m->epoch(), 1);
      }
    }
  }
}

TEST(ReplicaMapTest, PlacementRefusesWhatCannotHold) {
  EXPECT_FALSE(ReplicaMap::Place(64, 0, 1).ok());
  auto too_many = ReplicaMap::Place(64, 2, 3);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("between 1 and 2"), std::string::npos) << too_many.status();
  EXPECT_FALSE(ReplicaMap::Place(64, 2, 0).ok());
  EXPECT_FALSE(ReplicaMap::Place(3, 4, 1).ok());
}

// Every pserver of every small job, lost: each of its primary slots is taken over by the slot's
// first backup, every other holder keeps its place, nothing is lost while a copy remains, and
// the map's epoch rises.
TEST(ReplicaMapTest, FailingOverAnyPserverPromotesTheFirstBackupAndLosesNothing) {
  for (int p = 2; p <= 8; ++p) {
    for (int r = 2; r <= p; ++r) {
      auto m = ReplicaMap::Place(256, p, r);
      ASSERT_TRUE(m.ok());
      for (int dead = 0; dead < p; ++dead) {
        SCOPED_TRACE("P=" + std::to_string(p) + " R=" + std::to_string(r) + " dead=" + std::to_string(dead));
        auto f = m->FailOver(dead);
        ASSERT_TRUE(f.ok()) << f.status();
        ASSERT_TRUE(f->Validate().ok()) << f->Validate();
        EXPECT_EQ(f->epoch(), m->epoch() + 1);
        std::set<int> new_primaries;
        for (int s = 0; s < 256; ++s) {
          std::vector<int> want = m->HoldersOf(s);
          want.erase(std::remove(want.begin(), want.end(), dead), want.end());
          EXPECT_EQ(f->HoldersOf(s), want) << "slot " << s;
          if (m->PrimaryOf(s) == dead) new_primaries.insert(f->PrimaryOf(s));
        }
        EXPECT_TRUE(f->PrimarySlotsOf(dead).empty());
        EXPECT_TRUE(f->BackupSlotsOf(dead).empty());
        // The lost primaries fall to several pservers, not all to one neighbour.
        EXPECT_EQ(static_cast<int>(new_primaries.size()), std::min(p - 1, p - r + 1));
        EXPECT_EQ(f->UnderReplicated().size(),
                  m->PrimarySlotsOf(dead).size() + m->BackupSlotsOf(dead).size());
      }
    }
  }
}

TEST(ReplicaMapTest, LosingTheOnlyCopyIsDataLossNamingTheSlots) {
  auto one = ReplicaMap::Place(8, 2, 1);
  ASSERT_TRUE(one.ok());
  auto f = one->FailOver(1);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("only copy of slots 1, 3, 5, 7"), std::string::npos) << f.status();
  // R=2: the second failure loses exactly the slots both dead pservers held.
  auto two = ReplicaMap::Place(64, 4, 2);
  ASSERT_TRUE(two.ok());
  auto after = two->FailOver(0);
  ASSERT_TRUE(after.ok());
  bool shared = false;
  for (int s = 0; s < 64; ++s) {
    const auto& h = two->HoldersOf(s);
    shared |= std::find(h.begin(), h.end(), 0) != h.end() && std::find(h.begin(), h.end(), 1) != h.end();
  }
  EXPECT_EQ(after->FailOver(1).ok(), !shared);
  EXPECT_FALSE(two->FailOver(4).ok()) << "no such pserver";
}

// After any one failure, the restore plan brings every slot back to R copies on the live
// pservers, never onto a pserver that already holds the slot, evenly, each copied from the
// slot's primary.
TEST(ReplicaMapTest, RestoringAfterAFailureBringsEverySlotBackToItsCopiesEvenly) {
  for (int p = 3; p <= 8; ++p) {
    for (int r = 2; r < p; ++r) {
      auto m = ReplicaMap::Place(256, p, r);
      ASSERT_TRUE(m.ok());
      for (int dead = 0; dead < p; ++dead) {
        SCOPED_TRACE("P=" + std::to_string(p) + " R=" + std::to_string(r) + " dead=" + std::to_string(dead));
        auto f = m->FailOver(dead);
        ASSERT_TRUE(f.ok());
        std::vector<int> live;
        for (int i = 0; i < p; ++i)
          if (i != dead) live.push_back(i);
        auto plan = f->RestorePlan(live);
        EXPECT_EQ(plan.size(), f->UnderReplicated().size());
        for (const auto& c : plan) {
          EXPECT_NE(c.to, dead);
          EXPECT_EQ(c.from, f->PrimaryOf(c.slot));
        }
        auto restored = f->WithCopies(plan);
        ASSERT_TRUE(restored.ok()) << restored.status();
        ASSERT_TRUE(restored->Validate().ok());
        EXPECT_TRUE(restored->UnderReplicated().empty());
        EXPECT_EQ(restored->epoch(), f->epoch() + 1);
        std::vector<int> load = Load(*restored);
        load.erase(load.begin() + dead);
        EXPECT_LE(Spread(load), r) << "copies per live pserver";
        EXPECT_EQ(restored->PrimarySlotsOf(dead).size() + restored->BackupSlotsOf(dead).size(), 0u);
      }
    }
  }
}

TEST(ReplicaMapTest, WithTooFewLivePserversTheRestoreDoesWhatItCan) {
  auto m = ReplicaMap::Place(16, 3, 3);
  ASSERT_TRUE(m.ok());
  auto f = m->FailOver(2);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->RestorePlan({0, 1}).empty()) << "both live pservers hold every slot already";
  auto back = f->RestorePlan({0, 1, 2});  // the pserver restarted, empty
  EXPECT_EQ(back.size(), 16u);
  for (const auto& c : back) EXPECT_EQ(c.to, 2);
}

TEST(ReplicaMapTest, CopiesThatDoNotFitAreRefused) {
  auto m = ReplicaMap::Place(8, 3, 2);
  ASSERT_TRUE(m.ok());
  auto f = m->FailOver(0);
  ASSERT_TRUE(f.ok());
  const int s = f->UnderReplicated().front();
  const int holder = f->PrimaryOf(s);
  EXPECT_FALSE(f->WithCopies({{s, holder, holder}}).ok()) << "onto a holder";
  EXPECT_FALSE(f->WithCopies({{s, 0, 2}}).ok()) << "from a pserver without it";
  EXPECT_FALSE(f->WithCopies({{99, holder, 0}}).ok()) << "no such slot";
  const int full = [&] {
    for (int i = 0; i < 8; ++i)
      if (f->HoldersOf(i).size() == 2u) return i;
    return -1;
  }();
  ASSERT_GE(full, 0);
  const int spare = 3 - f->HoldersOf(full)[0] - f->HoldersOf(full)[1];
  EXPECT_FALSE(f->WithCopies({{full, f->PrimaryOf(full), spare}}).ok()) << "a slot with its copies";
}

TEST(ReplicaMapTest, TheRecordRoundTripsAndRefusesWhatCannotBeRight) {
  auto m = ReplicaMap::Place(64, 4, 3);
  ASSERT_TRUE(m.ok());
  auto f = m->FailOver(1);
  ASSERT_TRUE(f.ok());
  auto back = ReplicaMap::FromJson(f->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *f);
  for (const char* bad :
       {"[]", "{\"pservers\":2}", "not json", R"({"pservers":2,"replicas":2,"epoch":1,"holders":[]})",
        R"({"pservers":2,"replicas":2,"epoch":1,"holders":[[0,0]]})",
        R"({"pservers":2,"replicas":2,"epoch":1,"holders":[[0,2]]})",
        R"({"pservers":2,"replicas":1,"epoch":1,"holders":[[0,1]]})",
        R"({"pservers":2,"replicas":2,"epoch":1,"holders":[[]]})",
        R"({"pservers":2,"replicas":3,"epoch":1,"holders":[[0]]})"}) {
    auto r = ReplicaMap::FromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << bad;
    }
  }
}

// ---- Elastic pservers ---------------------------------------------------------------------------

TEST(ReplicaMapTest, BalancePlanSpreadsPrimariesOverTheLiveAndEmptiesTheLeaving) {
  for (int p = 1; p <= 6; ++p) {
    for (int first = 1; first <= p; ++first) {
      for (int slots : {p, 12, 64}) {
        auto start = ReplicaMap::PrimariesOnly(slots, p, 1, first);
        ASSERT_TRUE(start.ok()) << start.status();
        // Every subset of live pservers and, within it, every subset leaving.
        for (int live_mask = 1; live_mask < (1 << p); ++live_mask) {
          for (int leave_mask = live_mask;; leave_mask = (leave_mask - 1) & live_mask) {
            std::vector<int> live, leaving, stay;
            for (int q = 0; q < p; ++q) {
              if (!(live_mask >> q & 1)) continue;
              live.push_back(q);
              (leave_mask >> q & 1 ? leaving : stay).push_back(q);
            }
            SCOPED_TRACE("P=" + std::to_string(p) + " first=" + std::to_string(first) +
                         " S=" + std::to_string(slots) + " live=" + std::to_string(live_mask) +
                         " leaving=" + std::to_string(leave_mask));
            // Only live primaries can hand over: start from a map whose primaries are live.
            ReplicaMap m = *start;
            bool all_live = true;
            for (int s = 0; s < slots; ++s) all_live &= static_cast<bool>(live_mask >> m.PrimaryOf(s) & 1);
            if (all_live) {
              auto plan = m.BalancePlan(live, leaving);
              for (const auto& mv : plan) {
                ASSERT_EQ(m.PrimaryOf(mv.slot), mv.from);
                ASSERT_TRUE(std::find(stay.begin(), stay.end(), mv.to) != stay.end()) << mv.to;
                auto next = m.Handover(mv.slot, mv.to);
                ASSERT_TRUE(next.ok()) << next.status();
                EXPECT_EQ(next->epoch(), m.epoch() + 1);
                m = *next;
              }
              ASSERT_TRUE(m.Validate().ok()) << m.Validate();
              if (!stay.empty()) {
                std::vector<int> primaries(p, 0);
                for (int s = 0; s < slots; ++s) ++primaries[m.PrimaryOf(s)];
                int lo = slots, hi = 0;
                for (int q : stay) {
                  lo = std::min(lo, primaries[q]);
                  hi = std::max(hi, primaries[q]);
                }
                for (int q : leaving) EXPECT_EQ(primaries[q], 0) << "leaving pserver " << q;
                EXPECT_LE(hi - lo, 1);
                EXPECT_TRUE(m.BalancePlan(live, leaving).empty()) << "a balanced map needs no move";
              }
            }
            if (leave_mask == 0) break;
          }
        }
      }
    }
  }
}

TEST(ReplicaMapTest, HandoverMakesTheNewHostPrimaryAndTheOldOneLeave) {
  auto m = ReplicaMap::Place(6, 3, 2);
  ASSERT_TRUE(m.ok());
  const auto before = m->HoldersOf(0);         // {0, 1}
  auto to_backup = m->Handover(0, before[1]);  // the backup takes over: one copy left
  ASSERT_TRUE(to_backup.ok());
  EXPECT_EQ(to_backup->HoldersOf(0), std::vector<int>{before[1]});
  EXPECT_EQ(to_backup->UnderReplicated(), std::vector<int>{0});
  auto to_other = m->Handover(0, 2);  // a third host, given a copy first
  ASSERT_TRUE(to_other.ok());
  EXPECT_EQ(to_other->HoldersOf(0), (std::vector<int>{2, before[1]}));
  EXPECT_EQ(m->Handover(0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Handover(9, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Handover(0, 7).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
