// Tests of member order, MemberList::Find and MemberEpochs (pure).
#include "coord/member.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace tessera {
namespace {

MemberChange Put(const std::string& name, int64_t epoch) {
  MemberChange c;
  c.member.name = name;
  c.member.epoch = epoch;
  return c;
}
MemberChange Removed(const std::string& name) {
  MemberChange c;
  c.removed = true;
  c.member.name = name;
  return c;
}
MemberChanges Changes(std::vector<MemberChange> cs, bool relisted = false) {
  MemberChanges c;
  c.relisted = relisted;
  c.changes = std::move(cs);
  return c;
}
std::vector<std::string> Names(const std::vector<MemberEpochs::Left>& left) {
  std::vector<std::string> n;
  for (const auto& l : left) n.push_back(l.name + "@" + std::to_string(l.epoch));
  return n;
}

TEST(MemberTest, NumbersComeFirstInNumericOrderThenOtherNames) {
  std::vector<std::string> names = {"b", "10", "2", "a", "007", "7", "0", "trainer-3"};
  std::sort(names.begin(), names.end(), MemberNameLess);
  EXPECT_EQ(names, (std::vector<std::string>{"0", "2", "007", "7", "10", "a", "b", "trainer-3"}));
  EXPECT_FALSE(MemberNameLess("5", "5"));
  EXPECT_TRUE(MemberNameLess("999999999999999999", "1000000000000000000"))
      << "19 digits are not a number here: after every number";
}

TEST(MemberTest, FindIsABinarySearchOfTheSortedList) {
  MemberList l;
  for (const char* n : {"0", "1", "2", "10", "11", "x"})
    l.members.push_back(Member{n, "/p/" + std::string(n), "", 1, 0});
  for (const auto& m : l.members) {
    ASSERT_NE(l.Find(m.name), nullptr) << m.name;
    EXPECT_EQ(l.Find(m.name)->key, m.key);
  }
  EXPECT_EQ(l.Find("3"), nullptr);
  EXPECT_EQ(l.Find("01"), nullptr);
  EXPECT_EQ(l.Find(""), nullptr);
  EXPECT_EQ(MemberList().Find("0"), nullptr);
}

TEST(MemberTest, AMemberLeavesWhenRemovedOrPutAgainWithANewEpoch) {
  MemberEpochs e;
  EXPECT_TRUE(e.Apply(Changes({Put("0", 5), Put("1", 6), Put("2", 7)}, true)).empty());
  EXPECT_EQ(e.size(), 3u);
  EXPECT_TRUE(e.Apply(Changes({Put("1", 6)})).empty()) << "a value replaced: same epoch, still there";
  EXPECT_EQ(Names(e.Apply(Changes({Removed("0")}))), std::vector<std::string>{"0@5"});
  EXPECT_EQ(Names(e.Apply(Changes({Put("2", 9)}))), std::vector<std::string>{"2@7"});
  EXPECT_EQ(e.EpochOf("2"), 9);
  EXPECT_TRUE(e.Apply(Changes({Removed("0"), Removed("never")})).empty()) << "unknown: nothing left";
  EXPECT_EQ(Names(e.Apply(Changes({Put("3", 10), Removed("3"), Put("3", 11)}))),
            std::vector<std::string>{"3@10"})
      << "in the order seen";
  EXPECT_EQ(e.EpochOf("3"), 11);
  EXPECT_EQ(e.EpochOf("0"), 0);
}

TEST(MemberTest, ARelistLeavesEveryoneNotListedOrListedWithANewEpoch) {
  MemberEpochs e;
  (void)e.Apply(Changes({Put("0", 1), Put("1", 2), Put("2", 3), Put("10", 4)}, true));
  auto left = e.Apply(Changes({Put("1", 2), Put("2", 8), Put("5", 9)}, true));
  EXPECT_EQ(Names(left), (std::vector<std::string>{"0@1", "2@3", "10@4"}));
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(e.EpochOf("5"), 9);
  EXPECT_EQ(Names(e.Apply(Changes({}, true))), (std::vector<std::string>{"1@2", "2@8", "5@9"}));
  EXPECT_EQ(e.size(), 0u);
}

// Against the rule it replaces (each change diffed against the whole list): random joins,
// leaves, rejoins and relists, the same members leave with the same epochs.
TEST(MemberTest, FollowingChangesAgreesWithDiffingWholeLists) {
  std::mt19937 rng(42);
  for (int run = 0; run < 200; ++run) {
    MemberEpochs e;
    std::map<std::string, int64_t> truth, seen;  // the prefix now; what the old rule last saw
    int64_t revision = 0;
    for (int step = 0; step < 60; ++step) {
      MemberChanges c;
      c.relisted = rng() % 10 == 0;
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        const std::string name = std::to_string(rng() % 12);
        if (rng() % 3 == 0) {
          if (truth.erase(name) && !c.relisted) c.changes.push_back(Removed(name));
        } else {
          auto it = truth.find(name);
          const int64_t epoch = it != truth.end() && rng() % 2 ? it->second : ++revision;
          truth[name] = epoch;
          if (!c.relisted) c.changes.push_back(Put(name, epoch));
        }
      }
      if (c.relisted) {
        for (const auto& [name, epoch] : truth) c.changes.push_back(Put(name, epoch));
      }
      std::multiset<std::string> expected, got;
      for (const auto& [name, epoch] : seen) {
        auto it = truth.find(name);
        if (it == truth.end() || it->second != epoch) expected.insert(name + "@" + std::to_string(epoch));
      }
      for (const auto& n : Names(e.Apply(c))) got.insert(n);
      // Within one batch a member may leave and come back: the old rule saw only the end.
      if (!c.relisted && got != expected) {
        for (const auto& x : expected)
          ASSERT_TRUE(got.count(x)) << "run " << run << " step " << step << ": " << x;
      } else {
        ASSERT_EQ(got, expected) << "run " << run << " step " << step;
      }
      seen = truth;
      ASSERT_EQ(e.size(), truth.size());
      for (const auto& [name, epoch] : truth) ASSERT_EQ(e.EpochOf(name), epoch);
    }
  }
}

}  // namespace
}  // namespace tessera
