// Unit tests of the console's node history and cost history.
#include "master/console_state.h"

#include <gtest/gtest.h>

#include <functional>

namespace tessera::master {
namespace {

const NodeView* Find(const std::vector<NodeView>& nodes, const std::string& kind, const std::string& name) {
  for (const auto& n : nodes) {
    if (n.kind == kind && n.name == name) return &n;
  }
  return nullptr;
}

TEST(NodeTrackerTest, AliveLostAndRestartedUnderANewEpoch) {
  NodeTracker t;
  t.Update("pserver", {{"0", 10, "a:1", "{}"}, {"1", 11, "a:2", "{}"}}, 1000);
  t.Update("trainer", {{"0", 12, "", "{}"}}, 1000);
  auto n = t.Nodes();
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(Find(n, "pserver", "1")->state, "alive");
  // Pserver 1 goes away: lost; the trainers' update does not touch pservers.
  t.Update("pserver", {{"0", 10, "a:1", "{}"}}, 2000);
  t.Update("trainer", {{"0", 12, "", "{}"}}, 2500);
  n = t.Nodes();
  EXPECT_EQ(Find(n, "pserver", "1")->state, "lost");
  EXPECT_EQ(Find(n, "pserver", "1")->since_ms, 2000);
  EXPECT_EQ(Find(n, "pserver", "0")->last_seen_ms, 2000);
  // It comes back under a new epoch (and address): restarted.
  t.Update("pserver", {{"0", 10, "a:1", "{}"}, {"1", 20, "a:3", "{}"}}, 3000);
  n = t.Nodes();
  EXPECT_EQ(Find(n, "pserver", "1")->state, "restarted");
  EXPECT_EQ(Find(n, "pserver", "1")->restarts, 1);
  EXPECT_EQ(Find(n, "pserver", "1")->address, "a:3");
  EXPECT_EQ(Find(n, "pserver", "0")->state, "alive");
  const auto& h = Find(n, "pserver", "1")->history;
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0], (std::pair<std::string, int64_t>{"alive", 1000}));
  EXPECT_EQ(h[1], (std::pair<std::string, int64_t>{"lost", 2000}));
  EXPECT_EQ(h[2], (std::pair<std::string, int64_t>{"restarted", 3000}));
  EXPECT_TRUE(t.Known("trainer", "0"));
  EXPECT_FALSE(t.Known("trainer", "1"));
}

TEST(NodeTrackerTest, ATrainerThatDeregisteredIsFinishedNotLost) {
  NodeTracker t;
  t.Update("trainer", {{"0", 12, "", "{}"}, {"1", 13, "", "{}"}, {"2", 14, "", "{}"}}, 1000);
  std::vector<NodeTracker::Live> now = {{"2", 14, "", "{}"}};
  EXPECT_EQ(t.Departing("trainer", now), (std::vector<std::string>{"0", "1"}));
  // 0 left on purpose; 1's lease expired; a left marker of an older incarnation does not count.
  t.Update("trainer", now, 2000, {{"0", 12}, {"1", 5}});
  auto n = t.Nodes();
  EXPECT_EQ(Find(n, "trainer", "0")->state, "finished");
  EXPECT_EQ(Find(n, "trainer", "1")->state, "lost");
  EXPECT_EQ(Find(n, "trainer", "2")->state, "alive");
  EXPECT_TRUE(t.Departing("trainer", now).empty()) << "each departure is marked once";
  // A new trainer with the same id later is a restart.
  t.Update("trainer", {{"0", 30, "", "{}"}, {"2", 14, "", "{}"}}, 3000);
  EXPECT_EQ(Find(t.Nodes(), "trainer", "0")->state, "restarted");
}

TEST(CostHistoryTest, BoundedSinceAndJsonRoundTrip) {
  CostHistory h(3);
  for (int i = 0; i < 5; ++i) {
    CostPoint p;
    p.trainer = "0";
    p.step = i;
    p.cost = 1.0 / (i + 1);
    h.Add(p);
  }
  CostPoint eval;
  eval.metric = "accuracy";
  eval.value = 0.8;
  EXPECT_EQ(h.Add(eval), 6);
  auto all = h.Since(0);
  ASSERT_EQ(all.size(), 3u);  // the oldest went
  EXPECT_EQ(all.front().seq, 4);
  EXPECT_EQ(h.Since(5).size(), 1u);
  EXPECT_EQ(h.Since(6).size(), 0u);
  EXPECT_EQ(h.Since(0, 2).size(), 2u);
  auto back = CostHistory::FromJson(CostHistory::ToJson(all));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[2].metric, "accuracy");
  EXPECT_DOUBLE_EQ((*back)[0].cost, 1.0 / 4);
  // A new master restores them and continues the numbering.
  CostHistory next;
  next.Restore(*back);
  EXPECT_EQ(next.last_seq(), 6);
  EXPECT_EQ(next.Add(CostPoint{}), 7);
  EXPECT_FALSE(CostHistory::FromJson("{}").ok());
  EXPECT_FALSE(CostHistory::FromJson("[{\"step\":1}]").ok());  // no seq
}

// An evaluation is known again by its metric, pass, step and value, here or after a restore (a
// report sent again to the master that took over); another pass, step or value is another.
TEST(CostHistoryTest, AnEvaluationIsKnownAgainHereAndAfterARestore) {
  CostHistory h;
  CostPoint eval;
  eval.metric = "accuracy";
  eval.pass = 7;
  eval.step = 800;
  eval.value = 0.85;
  EXPECT_FALSE(h.HasEvaluation(eval));
  h.Add(eval);
  CostPoint cost;
  cost.trainer = "0";
  cost.pass = 7;
  cost.step = 800;
  h.Add(cost);
  EXPECT_TRUE(h.HasEvaluation(eval));
  CostHistory next;
  next.Restore(*CostHistory::FromJson(CostHistory::ToJson(h.Since(0))));
  EXPECT_TRUE(next.HasEvaluation(eval));
  for (auto change : std::vector<std::function<void(CostPoint&)>>{
           [](CostPoint& p) { p.pass = 8; }, [](CostPoint& p) { p.step = 900; },
           [](CostPoint& p) { p.value = 0.86; }, [](CostPoint& p) { p.metric = "loss"; }}) {
    CostPoint other = eval;
    change(other);
    EXPECT_FALSE(next.HasEvaluation(other)) << other.metric << " " << other.pass << " " << other.step;
  }
}

}  // namespace
// The watch and the periodic listing both feed the tracker; a list older than one already taken
// (a watch event delivered after a newer listing) is ignored, so a trainer that is there does not
// turn "lost" (it stayed "lost" for the rest of the run, its epoch unchanged).
TEST(NodeTrackerTest, AnOlderListAfterANewerOneChangesNothing) {
  NodeTracker t;
  EXPECT_TRUE(t.Update("trainer", {{"0", 7, "", "{}"}, {"1", 8, "", "{}"}}, 1000, {}, 20));
  EXPECT_FALSE(t.Update("trainer", {{"0", 7, "", "{}"}}, 1001, {}, 19));
  EXPECT_TRUE(t.Update("trainer", {{"0", 7, "", "{}"}, {"1", 8, "", "{}"}}, 1002, {}, 20));
  auto n = t.Nodes();
  EXPECT_EQ(Find(n, "trainer", "1")->state, "alive");
  EXPECT_EQ(Find(n, "trainer", "1")->history.size(), 1u);
  // A newer list without it: lost. Another kind has revisions of its own.
  EXPECT_TRUE(t.Update("trainer", {{"0", 7, "", "{}"}}, 2000, {}, 21));
  n = t.Nodes();
  EXPECT_EQ(Find(n, "trainer", "1")->state, "lost");
  EXPECT_TRUE(t.Update("pserver", {{"0", 3, "a:1", "{}"}}, 2000, {}, 5));
}

TEST(NodeTrackerTest, AnOlderListDepartsNobody) {
  // The master's trainers watch lags behind its periodic listing: the watch's list, older,
  // lacks the trainers that joined since. They are not departing (the master would read each
  // one's trainers-left record, on every lagging event: at 1,000 trainers, hundreds a second).
  NodeTracker t;
  EXPECT_TRUE(
      t.Update("trainer", {{"0", 7, "", "{}"}, {"1", 8, "", "{}"}, {"2", 9, "", "{}"}}, 1000, {}, 20));
  const std::vector<NodeTracker::Live> older = {{"0", 7, "", "{}"}};
  EXPECT_TRUE(t.Departing("trainer", older, 19).empty());
  EXPECT_EQ(t.Departing("trainer", older, 20), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(t.Departing("trainer", older, 21), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(t.Departing("trainer", older), (std::vector<std::string>{"1", "2"})) << "revision unknown";
  EXPECT_EQ(t.Departing("pserver", older, 1), std::vector<std::string>{}) << "kinds are apart";
}

}  // namespace tessera::master
