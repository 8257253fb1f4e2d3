// ReplicaLog and HeldReplies: what a primary publishes (and when nothing), the numbering a backup
// follows, commits, and the order held answers go out in.
#include "pserver/replica_log.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

class Outbox : public ReplicaOutbox {
 public:
  bool attached = true;
  std::vector<std::shared_ptr<const ReplicaMessage>> sent;
  bool Publish(std::shared_ptr<const ReplicaMessage> m) override {
    sent.push_back(std::move(m));
    return attached;
  }
};

Consistency::State AtVersion(int64_t v) {
  Consistency::State s;
  s.version = v;
  s.started = true;
  s.trainers.push_back({"t0", true, 1, 0, 1, v});
  return s;
}

wire::DataRequest Header(const ReplicaMessage& m) {
  wire::DataRequest r;
  EXPECT_TRUE(r.ParseFromString(m.header));
  return r;
}

TEST(ReplicaLogTest, NothingIsRecordedOrPublishedWithoutAnOutbox) {
  ReplicaLog log("tok", 3);
  EXPECT_FALSE(log.recording());
  const float g[2] = {1, 2};
  log.RecordDense("w", 0, g, 2);
  log.Publish(AtVersion(1), 7);
  EXPECT_EQ(log.seq(), 0);
  EXPECT_FALSE(log.uncommitted());
}

TEST(ReplicaLogTest, ARecordCarriesTheCallsTheScaleAndTheState) {
  ReplicaLog log("tok", 3);
  Outbox out;
  log.SetOutbox(&out, AtVersion(0));
  const float g[3] = {1, 2, 3};
  const uint64_t keys[1] = {42};
  const float rows[2] = {5, 6};
  log.RecordDense("w", 1, g, 3);
  log.RecordSparse("emb", keys, rows, 2);
  log.SetScale(0.25f);
  log.Publish(AtVersion(1), 7);
  ASSERT_EQ(out.sent.size(), 1u);
  EXPECT_EQ(log.seq(), 1);
  EXPECT_TRUE(log.uncommitted());
  const ReplicaMessage& m = *out.sent[0];
  EXPECT_EQ(m.seq, 1);
  wire::DataRequest r = Header(m);
  EXPECT_EQ(r.op(), wire::DataRequest::REPLICATE);
  EXPECT_EQ(r.job_token(), "tok");
  EXPECT_EQ(r.pserver_index(), 3);
  EXPECT_EQ(r.replica().seq(), 1);
  EXPECT_EQ(r.replica().primary_epoch(), 7);
  EXPECT_FLOAT_EQ(r.replica().scale(), 0.25f);
  EXPECT_FALSE(r.replica().snapshot());
  EXPECT_EQ(ConsistencyStateFromWire(r.replica().state()), AtVersion(1));
  ASSERT_EQ(r.push_size(), 2);
  EXPECT_EQ(r.push(0).param(), "w");
  EXPECT_EQ(r.push(0).block(), 1);
  EXPECT_EQ(r.push(0).count(), 3);
  EXPECT_EQ(r.push(1).param(), "emb");
  EXPECT_EQ(r.push(1).block(), -1);
  ASSERT_EQ(r.push(1).keys_size(), 1);
  EXPECT_EQ(r.push(1).keys(0), 42u);
  ASSERT_EQ(m.payload.size(), 5 * sizeof(float));
  const float* p = reinterpret_cast<const float*>(m.payload.data());
  EXPECT_EQ(std::vector<float>(p, p + 5), (std::vector<float>{1, 2, 3, 5, 6}));

  // The next record starts empty: the same state and no calls publish nothing.
  log.Publish(AtVersion(1), 7);
  EXPECT_EQ(out.sent.size(), 1u);
  // A state change alone is a record.
  log.Publish(AtVersion(2), 7);
  ASSERT_EQ(out.sent.size(), 2u);
  EXPECT_EQ(Header(*out.sent[1]).push_size(), 0);
  EXPECT_TRUE(out.sent[1]->payload.empty());
}

TEST(ReplicaLogTest, ARecordNoStreamTakesIsCommittedAtOnce) {
  ReplicaLog log("tok", 0);
  Outbox out;
  out.attached = false;
  log.SetOutbox(&out, AtVersion(0));
  log.Publish(AtVersion(1), 1);
  EXPECT_EQ(log.seq(), 1);
  EXPECT_FALSE(log.uncommitted());
}

TEST(ReplicaLogTest, CommitsGoForwardOnlyAndNoFurtherThanPublished) {
  ReplicaLog log("tok", 0);
  Outbox out;
  log.SetOutbox(&out, AtVersion(0));
  for (int64_t v = 1; v <= 3; ++v) log.Publish(AtVersion(v), 1);
  EXPECT_TRUE(log.Commit(2));
  EXPECT_EQ(log.committed(), 2);
  EXPECT_FALSE(log.Commit(2));
  EXPECT_FALSE(log.Commit(1));
  EXPECT_TRUE(log.Commit(10));
  EXPECT_EQ(log.committed(), 3);
  EXPECT_FALSE(log.uncommitted());
}

TEST(ReplicaLogTest, ASnapshotRecordStartsWhereThePrimaryIs) {
  ReplicaLog log("tok", 2);
  Outbox out;
  log.SetOutbox(&out, AtVersion(0));
  log.Publish(AtVersion(1), 4);
  auto m = log.SnapshotRecord(AtVersion(1), 4, "CHECKPOINT");
  EXPECT_EQ(m->seq, 1);
  EXPECT_EQ(m->payload, "CHECKPOINT");
  wire::DataRequest r = Header(*m);
  EXPECT_TRUE(r.replica().snapshot());
  EXPECT_EQ(r.replica().seq(), 1);
  EXPECT_EQ(r.replica().primary_epoch(), 4);
  EXPECT_EQ(log.seq(), 1);  // a snapshot is not a new record
}

TEST(ReplicaLogTest, ABackupFollowsThenTakesOverNumberingAgain) {
  ReplicaLog log("tok", 0);
  log.Applied(5, 3);
  EXPECT_EQ(log.seq(), 5);
  EXPECT_EQ(log.primary_epoch(), 3);
  log.Promote(AtVersion(9));
  EXPECT_EQ(log.seq(), 0);
  EXPECT_EQ(log.primary_epoch(), 0);
  Outbox out;
  log.SetOutbox(&out, AtVersion(9));
  log.Publish(AtVersion(9), 8);  // nothing changed since the promotion
  EXPECT_TRUE(out.sent.empty());
  log.Publish(AtVersion(10), 8);
  ASSERT_EQ(out.sent.size(), 1u);
  EXPECT_EQ(out.sent[0]->seq, 1);
}

TEST(ReplicaLogTest, TheStateSurvivesTheWire) {
  Consistency::State s = AtVersion(12);
  s.clock_floor = 4;
  s.trainers.push_back({"t1", false, 2, 3, 4, 5});
  wire::ConsistencyState w;
  ConsistencyStateToWire(s, &w);
  EXPECT_EQ(ConsistencyStateFromWire(w), s);
}

TEST(HeldRepliesTest, ReleasedInOrderUpToTheCommittedRecord) {
  HeldReplies<std::string> held;
  std::vector<std::string> a{"a1", "a2"}, b{"b1"}, c{"c1"};
  held.Hold(1, &a);
  held.Hold(2, &b);
  held.Hold(4, &c);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(held.Release(0).empty());
  EXPECT_EQ(held.Release(2), (std::vector<std::string>{"a1", "a2", "b1"}));
  EXPECT_TRUE(held.Release(3).empty());
  EXPECT_EQ(held.size(), 1u);
  EXPECT_EQ(held.TakeAll(), (std::vector<std::string>{"c1"}));
  EXPECT_EQ(held.size(), 0u);
}

}  // namespace
}  // namespace tessera
