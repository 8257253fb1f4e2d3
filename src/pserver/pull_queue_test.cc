// PullQueue: waiting pulls released by ticket or by a test (their lists still read their own
// segments after the request they came from is gone), and the replies an apply writes into.
#include "pserver/pull_queue.h"

#include <gtest/gtest.h>

#include "pserver/one_shard_for_tests.h"

namespace tessera {
namespace {

class FakeResponder : public Responder {
 public:
  std::vector<float> memory;
  MutableBuffer Allocate(size_t bytes) override {
    memory.assign(bytes / sizeof(float), 0);
    return {memory.data(), bytes};
  }
  void Send(std::string_view, std::span<const ConstBuffer>) override {}
};

// One pserver holding "w" (25 floats in blocks of 10) and the table "emb" (rows of 3).
class PullQueueTest : public OneShardTest {
 protected:
  // A request pulling the dense blocks `blocks` of "w" (and a row of "emb" if `sparse`).
  static wire::DataRequest Pulling(std::vector<int64_t> blocks, bool sparse = false) {
    wire::DataRequest r;
    r.set_trainer("t");
    if (sparse) {
      auto* s = r.add_pull();
      s->set_param("emb");
      s->set_block(-1);
      s->set_count(1);
      s->add_keys(7);
    }
    for (int64_t b : blocks) {
      auto* s = r.add_pull();
      s->set_param("w");
      s->set_block(b);
      s->set_count(b == 2 ? 5 : 10);
    }
    return r;
  }
  SegmentList ListOf(const wire::DataRequest& r) {
    auto l = SegmentList::Read(store_, r.pull(), SegmentList::Use::kPull);
    EXPECT_TRUE(l.ok()) << l.status().message();
    return std::move(*l);
  }
};

TEST_F(PullQueueTest, AWaitingPullReadsItsOwnCopyOfTheRequest) {
  PullQueue q;
  const uint64_t t1 = q.NextTicket(), t2 = q.NextTicket();
  EXPECT_LT(t1, t2);
  {
    auto req = std::make_unique<wire::DataRequest>(Pulling({0, 2}));
    SegmentList list = ListOf(*req);
    q.Park(t1, false, *req, std::move(list), std::make_unique<FakeResponder>(), nullptr, {});
  }  // the request it was read from is gone
  q.Park(t2, true, Pulling({1}), ListOf(Pulling({1})), std::make_unique<FakeResponder>(), nullptr, {});
  EXPECT_EQ(q.size(), 2u);

  int answered = 0;
  q.Release(t1, [&](PullQueue::Pending& w) {
    ++answered;
    ASSERT_EQ(w.pull.parts().size(), 2u);
    EXPECT_EQ(w.pull.segment(w.pull.parts()[1]).block(), 2);
    EXPECT_EQ(w.pull.bytes(), 15 * sizeof(float));
    EXPECT_TRUE(w.responder != nullptr);
  });
  q.Release(t1, [&](PullQueue::Pending&) { ++answered; });  // already gone
  q.Release(99, [&](PullQueue::Pending&) { ++answered; });  // never waited
  EXPECT_EQ(answered, 1);
  EXPECT_EQ(q.size(), 1u);
}

TEST_F(PullQueueTest, ReleaseIfTakesThoseThatMayGoInTicketOrder) {
  PullQueue q;
  for (int i = 0; i < 5; ++i) {
    const wire::DataRequest r = Pulling({i % 3});
    q.Park(q.NextTicket(), i % 2 == 0, r, ListOf(r), std::make_unique<FakeResponder>(), nullptr, {});
  }
  std::vector<uint64_t> released;
  q.ReleaseIf([](const PullQueue::Pending& w) { return w.piece; },
              [&](uint64_t t, PullQueue::Pending& w) {
                released.push_back(t);
                EXPECT_EQ(w.pull.segment(w.pull.parts()[0]).block(), static_cast<int64_t>((t - 1) % 3));
              });
  EXPECT_EQ(released, (std::vector<uint64_t>{1, 3, 5}));
  EXPECT_EQ(q.size(), 2u);
  auto all = q.TakeAll();
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(all.begin()->first, 2u);
  EXPECT_EQ(q.size(), 0u);
}

TEST_F(PullQueueTest, OnlyAPullWithADenseBlockIsPrepared) {
  FakeResponder r;
  const wire::DataRequest sparse = Pulling({}, true);
  EXPECT_EQ(PullQueue::Prepare(ListOf(sparse), r), nullptr);
  const wire::DataRequest mixed = Pulling({1}, true);
  auto p = PullQueue::Prepare(ListOf(mixed), r);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->payload.size, 13 * sizeof(float));
  EXPECT_EQ(p->written, (std::vector<uint64_t>{0, 0}));
}

TEST_F(PullQueueTest, AnApplyWritesIntoEveryPreparedReplyOfItsBlocks) {
  PullQueue q;
  const wire::DataRequest a = Pulling({0, 2}), b = Pulling({2}, true);
  SegmentList la = ListOf(a), lb = ListOf(b);
  FakeResponder ra, rb;
  auto pa = PullQueue::Prepare(la, ra), pb = PullQueue::Prepare(lb, rb);
  q.WriteByNextApply(pa.get(), &la);
  q.WriteByNextApply(pb.get(), &lb);
  const std::string w = "w";
  std::vector<ShardStore::DenseUpdate> updates = {{&w, 0, nullptr}, {&w, 1, nullptr}, {&w, 2, nullptr}};
  q.Attach(updates);
  ASSERT_EQ(updates[0].copies, 1);  // block 0: a's
  EXPECT_EQ(updates[0].copy_to[0], ra.memory.data());
  EXPECT_EQ(updates[1].copies, 0);  // block 1: nobody's
  ASSERT_EQ(updates[2].copies, 2);  // block 2: a's after block 0, b's after the row of 3
  EXPECT_EQ(updates[2].copy_to[0], ra.memory.data() + 10);
  EXPECT_EQ(updates[2].copy_to[1], rb.memory.data() + 3);
  q.MarkWritten(7);
  EXPECT_EQ(pa->written, (std::vector<uint64_t>{7, 7}));
  EXPECT_EQ(pb->written, (std::vector<uint64_t>{0, 7}));  // the sparse row is not the apply's

  // Forgotten after the apply: the next one writes nowhere.
  std::vector<ShardStore::DenseUpdate> next = {{&w, 0, nullptr}};
  q.Attach(next);
  EXPECT_EQ(next[0].copies, 0);
}

TEST_F(PullQueueTest, WaitingPullsArePreparedWhenAnApplyIsToWriteIntoThem) {
  PullQueue q;
  const wire::DataRequest a = Pulling({1});
  q.Park(1, false, a, ListOf(a), std::make_unique<FakeResponder>(), nullptr, {});
  const uint64_t tickets[] = {1, 5};  // 5 does not wait
  const std::string w = "w";
  // One its filter says takes no float32 values written by the apply (a pull in a wire format):
  // left alone, not prepared.
  q.WriteByNextApply(tickets, [](const PullQueue::Pending&) { return false; });
  std::vector<ShardStore::DenseUpdate> none = {{&w, 1, nullptr}};
  q.Attach(none);
  EXPECT_EQ(none[0].copies, 0);
  q.ForgetWrites();
  q.WriteByNextApply(tickets, [](const PullQueue::Pending&) { return true; });
  std::vector<ShardStore::DenseUpdate> updates = {{&w, 1, nullptr}};
  q.Attach(updates);
  EXPECT_EQ(updates[0].copies, 1);
  q.MarkWritten(3);
  q.Release(1, [](PullQueue::Pending& p) {
    ASSERT_NE(p.prepared, nullptr);
    EXPECT_EQ(p.prepared->written, (std::vector<uint64_t>{3}));
  });
  // ForgetWrites: an apply that did not come writes nothing later.
  const wire::DataRequest b = Pulling({0});
  SegmentList lb = ListOf(b);
  FakeResponder rb;
  auto pb = PullQueue::Prepare(lb, rb);
  q.WriteByNextApply(pb.get(), &lb);
  q.ForgetWrites();
  std::vector<ShardStore::DenseUpdate> later = {{&w, 0, nullptr}};
  q.Attach(later);
  EXPECT_EQ(later[0].copies, 0);
}

}  // namespace
}  // namespace tessera
