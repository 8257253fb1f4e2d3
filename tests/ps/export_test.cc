// `tessera export` while a job trains takes one consistent cut of the model. A trainer pushes a
// gradient of 1 to every element of "w" and every row of "emb" each step (SGD lr 1, one
// sample), so after v updates every value is -v: in a sync job an export must hold -step
// everywhere, on both pservers and across every page of the table; in async each pserver's part
// must be all one value (its shard copied at one moment).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "client/exporter.h"
#include "job/placement.h"
#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

constexpr size_t kDense = 4096;   // 64 blocks of 64 over 2 pservers
constexpr size_t kKeys = 150000;  // ~75k rows per pserver: more than one 65536-row page each

class ExportTest : public PsTest {
 protected:
  // Starts `job` (2 pservers, `mode`) and a trainer thread pushing ones until Stop().
  void Start(const std::string& job, const std::string& mode) {
    MakeJob(job, 2, mode, "sgd:lr=1");
    StartPserver(job);
    StartPserver(job);
    ASSERT_TRUE(WaitForPservers(job, 2));
    auto c = Client::Connect(ClientFor(job));
    ASSERT_TRUE(c.ok()) << c.status();
    client_ps_ = std::move(*c);
    w_.assign(kDense, 0.0f);
    ASSERT_TRUE(client_ps_->AddDense("w", w_.data(), w_.size()).ok());
    ASSERT_TRUE(client_ps_->AddSparse("emb", 2, *InitializerConfig::Parse("zeros")).ok());
    Status s = client_ps_->Initialize();
    ASSERT_TRUE(s.ok()) << s;
    for (uint64_t k = 0; k < kKeys; ++k) keys_.push_back(k * 2654435761u + 17);
    trainer_ = std::thread([this] {
      std::vector<float> gw(kDense, 1.0f), ge(kKeys * 2, 1.0f);
      const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(3);
      for (int i = 0; i < 100000 && !stop_ && std::chrono::steady_clock::now() < until; ++i) {
        Gradients g;
        g.Dense("w", gw);
        g.Sparse("emb", keys_, ge);
        g.samples = 1;
        Status st = client_ps_->PushPull(g).Wait();
        if (!st.ok()) {
          trainer_error_ = st.ToString();
          return;
        }
        steps_ = i + 1;
      }
    });
    ASSERT_TRUE(WaitUntil([&] { return steps_ >= 2 || !trainer_error_.empty(); }, std::chrono::seconds(60)));
    ASSERT_EQ(trainer_error_, "");
  }
  void TearDown() override {
    stop_ = true;
    if (trainer_.joinable()) trainer_.join();
    if (client_ps_) (void)client_ps_->Close();
    PsTest::TearDown();
  }
  models::ModelFile Export(const std::string& job) {
    auto m = ExportModel(client_.get(), job, SecretOf(job), std::chrono::seconds(60));
    EXPECT_TRUE(m.ok()) << m.status();
    return m.value_or(models::ModelFile());
  }
  // The exported tensor `name`.
  static const models::ModelTensor* Tensor(const models::ModelFile& m, const std::string& name) {
    for (const auto& t : m.tensors)
      if (t.name == name) return &t;
    return nullptr;
  }

  std::unique_ptr<Client> client_ps_;
  std::vector<float> w_;
  std::vector<uint64_t> keys_;
  std::thread trainer_;
  std::atomic<bool> stop_{false};
  std::atomic<int> steps_{0};
  std::string trainer_error_;
};

TEST_F(ExportTest, AnExportWhileASyncJobTrainsHoldsOneVersionOnEveryPserverAndPage) {
  ASSERT_NO_FATAL_FAILURE(Start("export-sync", "sync"));
  int64_t last = 0;
  for (int e = 0; e < 8; ++e) {
    const int before = steps_;
    auto m = Export("export-sync");
    ASSERT_FALSE(m.tensors.empty());
    const float v = -static_cast<float>(m.step);
    EXPECT_GE(m.step, before) << "export " << e;
    EXPECT_GT(m.step, last) << "export " << e << ": the job moved on between two exports";
    last = m.step;
    const auto* w = Tensor(m, "w");
    const auto* emb = Tensor(m, "emb");
    ASSERT_TRUE(w && emb);
    ASSERT_EQ(w->values.size(), kDense);
    for (size_t i = 0; i < kDense; ++i) ASSERT_EQ(w->values[i], v) << "w[" << i << "], export " << e;
    ASSERT_EQ(emb->keys.size(), kKeys);
    EXPECT_EQ(std::set<uint64_t>(emb->keys.begin(), emb->keys.end()),
              std::set<uint64_t>(keys_.begin(), keys_.end()));
    for (size_t i = 0; i < emb->values.size(); ++i)
      ASSERT_EQ(emb->values[i], v) << "row " << i / 2 << " (key " << emb->keys[i / 2] << "), export " << e;
    // Let the job move on a little before the next one.
    const int now = steps_;
    ASSERT_TRUE(
        WaitUntil([&] { return steps_ > now + 1 || !trainer_error_.empty(); }, std::chrono::seconds(60)));
  }
  ASSERT_EQ(trainer_error_, "");
}

TEST_F(ExportTest, AnExportWhileAnAsyncJobTrainsCopiesEachShardAtOneMoment) {
  ASSERT_NO_FATAL_FAILURE(Start("export-async", "async"));
  auto slots = SlotMap::RoundRobin(64, 2);
  for (int e = 0; e < 5; ++e) {
    auto m = Export("export-async");
    const auto* w = Tensor(m, "w");
    const auto* emb = Tensor(m, "emb");
    ASSERT_TRUE(w && emb);
    ASSERT_EQ(emb->keys.size(), kKeys);
    // Each pserver's values (dense blocks and rows) are all the same number.
    std::map<int, std::set<float>> seen;
    for (size_t i = 0; i < kDense; ++i)
      seen[slots.PserverOf(SlotOfBlock("w", i / 64, 64))].insert(w->values[i]);
    for (size_t r = 0; r < emb->keys.size(); ++r) {
      const int p = slots.PserverOf(SlotOfKey("emb", emb->keys[r], 64));
      seen[p].insert(emb->values[2 * r]);
      seen[p].insert(emb->values[2 * r + 1]);
    }
    ASSERT_EQ(seen.size(), 2u);
    for (const auto& [p, values] : seen) {
      EXPECT_EQ(values.size(), 1u) << "pserver " << p << " gave " << values.size()
                                   << " different values, export " << e;
    }
  }
  ASSERT_EQ(trainer_error_, "");
}

}  // namespace
}  // namespace tessera::testing
