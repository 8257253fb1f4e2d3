// Incremental checkpoints through the checkpointer and a real etcd: records list their chain,
// recovery applies the deltas to the base, a damaged delta falls back to the record before it, a
// damaged base to nothing, a delta that does not build on the last record is refused, and a
// restarted checkpointer continues the chain it loaded.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint/checkpointer.h"
#include "checkpoint/delta_policy.h"
#include "ps/ps_fixture.h"
#include "pserver/shard_store.h"

namespace tessera::testing {
namespace {

class CheckpointChainTest : public PsTest {
 protected:
  void SetUp() override {
    PsTest::SetUp();
    ASSERT_TRUE(client_->Put(keys::Pserver(job_, 0), "{}").ok());
    epoch_ = client_->Get(keys::Pserver(job_, 0))->kvs[0].create_revision;
    store_ = NewStore();
  }

  std::unique_ptr<ShardStore> NewStore() {
    JobConfig cfg;
    cfg.pservers = 1;
    cfg.slots = 16;
    auto s = std::make_unique<ShardStore>(0, cfg, SlotMap::RoundRobin(16, 1));
    EXPECT_TRUE(s->Declare({"emb", true, 0, 4, *OptimizerConfig::Parse("adagrad:lr=0.5"), {}}).ok());
    return s;
  }

  // Pushes rows [from, to) of the table.
  void Push(uint64_t from, uint64_t to, float g) {
    std::vector<uint64_t> keys;
    for (uint64_t k = from; k < to; ++k) keys.push_back(k);
    std::vector<float> grads(keys.size() * 4, g);
    store_->ApplySparse("emb", keys, grads.data(), 1.0f);
  }

  // A checkpoint of the store at `version` as the pserver takes it (delta when the policy allows).
  StatusOr<CheckpointRecord> Save(Checkpointer& ck, int64_t version) {
    const bool delta =
        ChooseCheckpointKind(ck.chain(), store_->checkpoint_gen(), store_->DeltaBytes(), DeltaPolicy{}).delta;
    Checkpoint c{job_, 0, version, version, store_->CheckpointSnapshot(delta)};
    c.gen = store_->checkpoint_gen();
    return ck.Save(std::move(c));
  }

  // The store restored from `c`, copied whole.
  ShardSnapshot Restored(const Checkpoint& c) {
    auto s = NewStore();
    EXPECT_TRUE(s->Restore(c.shard).ok());
    return s->Snapshot();
  }

  static std::map<uint64_t, std::vector<float>> Rows(const ShardSnapshot& s) {
    std::map<uint64_t, std::vector<float>> out;
    const auto& t = s.sparse.at(0);
    for (size_t r = 0; r < t.keys.size(); ++r)
      out[t.keys[r]] = std::vector<float>(t.arena.begin() + r * 8, t.arena.begin() + (r + 1) * 8);
    return out;
  }

  void Damage(const std::string& uuid) {
    std::fstream f(CheckpointPath(dir_ + "/ckpt", job_, 0, uuid),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }

  const std::string job_ = "chain";
  int64_t epoch_ = 0;
  std::unique_ptr<ShardStore> store_;
};

TEST_F(CheckpointChainTest, RecordsListTheirChainAndRecoveryAppliesItsDeltas) {
  Checkpointer ck(client_.get(), job_, 0, epoch_, dir_ + "/ckpt");
  Push(0, 10000, 1.0f);
  auto base = Save(ck, 1);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_FALSE(base->delta());
  std::vector<std::map<uint64_t, std::vector<float>>> states = {Rows(store_->Snapshot())};
  for (int v = 2; v <= 4; ++v) {
    Push(v * 100, v * 100 + 100, 0.1f * v);  // 1% of the rows change, some rows are new
    Push(20000 + v, 20001 + v, 1.0f);
    auto d = Save(ck, v);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(d->delta()) << "version " << v;
    ASSERT_EQ(d->chain.size(), static_cast<size_t>(v - 1));
    EXPECT_EQ(d->chain[0].uuid, base->uuid);
    EXPECT_LT(d->bytes * 20, base->bytes) << "a delta of 1% of the rows is not small";
    states.push_back(Rows(store_->Snapshot()));
  }
  // A new checkpointer (a restarted pserver) loads base + 3 deltas.
  Checkpointer again(client_.get(), job_, 0, epoch_, dir_ + "/ckpt");
  auto latest = again.LoadLatest();
  ASSERT_TRUE(latest.ok() && *latest) << latest.status();
  EXPECT_EQ((*latest)->version, 4);
  EXPECT_EQ(Rows(Restored(**latest)), states[3]);

  // It continues that chain: the next delta names the loaded one as its parent.
  store_ = NewStore();
  ASSERT_TRUE(store_->Restore((*latest)->shard).ok());
  again.Continue(store_->checkpoint_gen());
  const CheckpointChainState chain = again.chain();
  EXPECT_EQ(chain.deltas, 3);
  EXPECT_EQ(chain.base_bytes, base->bytes);
  Push(500, 600, 0.5f);
  auto next = Save(again, 5);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(next->delta());
  EXPECT_EQ(next->chain.size(), 4u);
  states.push_back(Rows(store_->Snapshot()));

  // The newest delta damaged: the record before it (version 4) loads, with a log line.
  Damage(next->uuid);
  Checkpointer third(client_.get(), job_, 0, epoch_, dir_ + "/ckpt");
  latest = third.LoadLatest();
  ASSERT_TRUE(latest.ok() && *latest);
  EXPECT_EQ((*latest)->version, 4);
  EXPECT_EQ(Rows(Restored(**latest)), states[3]);
  // The base damaged: both records need it, nothing loads (a trainer initializes the shard).
  Damage(base->uuid);
  latest = Checkpointer(client_.get(), job_, 0, epoch_, dir_ + "/ckpt").LoadLatest();
  ASSERT_TRUE(latest.ok());
  EXPECT_FALSE(latest->has_value());
}

TEST_F(CheckpointChainTest, ADeltaThatDoesNotBuildOnTheLastRecordIsRefused) {
  Checkpointer ck(client_.get(), job_, 0, epoch_, dir_ + "/ckpt");
  Push(0, 1000, 1.0f);
  // No chain yet: a delta is refused and nothing is recorded.
  Checkpoint orphan{job_, 0, 1, 1, store_->CheckpointSnapshot(true)};
  orphan.gen = store_->checkpoint_gen();
  EXPECT_EQ(ck.Save(orphan).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(client_->Get(keys::Checkpoint(job_, 0))->kvs.empty());
  ASSERT_TRUE(Save(ck, 2).ok());  // whole
  // A copy that was never recorded cleared the record of changes: the delta after it would
  // miss them. The checkpointer refuses it, and the policy would not have taken one.
  Push(0, 10, 1.0f);
  (void)store_->CheckpointSnapshot(true);
  Push(10, 20, 1.0f);
  Checkpoint skipped{job_, 0, 3, 3, store_->CheckpointSnapshot(true)};
  skipped.gen = store_->checkpoint_gen();
  EXPECT_EQ(ck.Save(skipped).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(ChooseCheckpointKind(ck.chain(), store_->checkpoint_gen(), 1, DeltaPolicy{}).delta);
  auto whole = Save(ck, 3);
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(whole->delta());
}

}  // namespace
}  // namespace tessera::testing
