// Sparse tables: the same keys give the same initial rows across runs and pservers, and
// gradients land on the right rows.
#include <gtest/gtest.h>

#include "common/hash.h"
#include "job/placement.h"
#include "ps/ps_fixture.h"
#include "pserver/initializer.h"

namespace tessera::testing {
namespace {

const InitializerConfig kInit = *InitializerConfig::Parse("normal:0,0.1,seed=5");

class SparseTest : public PsTest {
 protected:
  // Starts a job with two pservers and a client with table "emb" (dim 8).
  std::unique_ptr<Client> Start(const std::string& job) {
    MakeJob(job, 2, "sync", "sgd:lr=0.5");
    StartPserver(job);
    StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, 2));
    auto c = Client::Connect(ClientFor(job));
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE((*c)->AddSparse("emb", 8, kInit).ok());
    Status s = (*c)->Initialize();
    EXPECT_TRUE(s.ok()) << s;
    return std::move(*c);
  }
};

TEST_F(SparseTest, SameKeysGiveTheSameInitialRowsAcrossRunsAndPservers) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 60; ++k) keys.push_back(k * 7919);
  keys.push_back(keys[3]);  // a repeated key gets the same row twice
  // The keys really are spread over both pservers.
  auto slots = SlotMap::RoundRobin(64, 2);
  int on1 = 0;
  for (uint64_t k : keys) on1 += slots.PserverOf(SlotOfKey("emb", k, 64));
  ASSERT_GT(on1, 5);
  ASSERT_LT(on1, 55);

  auto first = Start("sparse-a");
  std::vector<float> a(keys.size() * 8);
  ASSERT_TRUE(first->SparsePull("emb", keys, a.data()).Wait().ok());
  auto second = Start("sparse-b");  // a separate job with its own pservers
  std::vector<float> b(keys.size() * 8);
  ASSERT_TRUE(second->SparsePull("emb", keys, b.data()).Wait().ok());
  EXPECT_EQ(a, b);
  for (size_t i = 0; i < keys.size(); ++i) {
    float expect[8];
    InitRow(kInit, Hash64("emb"), keys[i], expect, 8);
    for (int j = 0; j < 8; ++j) ASSERT_EQ(a[i * 8 + j], expect[j]) << "key " << keys[i];
  }
  EXPECT_EQ(std::vector<float>(a.begin() + 3 * 8, a.begin() + 4 * 8),
            std::vector<float>(a.end() - 8, a.end()));
}

TEST_F(SparseTest, GradientsLandOnTheRightRows) {
  auto c = Start("sparse-upd");
  std::vector<uint64_t> all{3, 10, 11, 99};
  std::vector<float> before(all.size() * 8);
  ASSERT_TRUE(c->SparsePull("emb", all, before.data()).Wait().ok());
  // Key 3 appears twice (its gradients add up), 10 once; 11 and 99 are not touched.
  std::vector<uint64_t> keys{3, 10, 3};
  std::vector<float> grads(3 * 8);
  for (int j = 0; j < 8; ++j) {
    grads[j] = 1.0f + j;
    grads[8 + j] = -2.0f;
    grads[16 + j] = 0.5f;
  }
  Gradients g;
  g.Sparse("emb", keys, grads);
  g.samples = 2;
  ASSERT_TRUE(c->Push(g).Wait().ok());
  std::vector<float> after(all.size() * 8);
  ASSERT_TRUE(c->SparsePull("emb", all, after.data()).Wait().ok());
  for (int j = 0; j < 8; ++j) {
    EXPECT_FLOAT_EQ(after[j], before[j] - 0.5f * (1.0f + j + 0.5f) / 2) << "key 3, " << j;
    EXPECT_FLOAT_EQ(after[8 + j], before[8 + j] - 0.5f * (-2.0f) / 2) << "key 10, " << j;
    EXPECT_EQ(after[16 + j], before[16 + j]) << "key 11 must not change";
    EXPECT_EQ(after[24 + j], before[24 + j]) << "key 99 must not change";
  }
}

}  // namespace
}  // namespace tessera::testing
