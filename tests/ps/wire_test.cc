// A job's wire format (job/wire_format.h) between real trainers and pserver processes: half
// precision halves the bytes while the pservers' state stays float32 (values the wire carries
// exactly come out exactly), and top-k and sign pushes lose nothing over steps (error feedback on
// the trainer): every element moves, although a step sends a quarter of them or their signs.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <thread>

#include "common/files.h"
#include "job/wire_codec.h"
#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

class WireTest : public PsTest {
 protected:
  static constexpr int kDim = 256;  // 4 blocks of 64: two on each pserver

  // A sync job on 2 pservers in wire format `wire`, SGD at `lr`, with `trainers` trainers running
  // `steps` steps of gradient grad(id, j) over `transport`; returns trainer 0's values at the end.
  // (`dim` elements in blocks of `block`).
  std::vector<float> Train(const std::string& job, const std::string& wire, const std::string& lr,
                           int trainers, int steps, const std::function<float(int, int)>& grad,
                           const std::string& transport = "auto", int dim = kDim, int64_t block = 64) {
    wire_ = *WireChoice::Parse(wire);
    MakeJob(job, 2, "sync", "sgd:lr=" + lr, block, trainers);
    for (int p = 0; p < 2; ++p) StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, 2));
    std::vector<float> out;
    auto trainer = [&](int id) {
      ClientOptions o = ClientFor(job, std::to_string(id));
      o.transport = transport;
      auto c = Client::Connect(o);
      ASSERT_TRUE(c.ok()) << c.status();
      std::vector<float> w(dim, 0.5f);
      ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
      ASSERT_TRUE((*c)->Initialize().ok());
      std::vector<float> g(dim);
      for (int s = 0; s < steps; ++s) {
        for (int j = 0; j < dim; ++j) g[j] = grad(id, j);
        Gradients grads;
        grads.Dense("w", g);
        grads.samples = 1;
        Status st = (*c)->PushPull(grads).Wait();
        ASSERT_TRUE(st.ok()) << "trainer " << id << " step " << s << ": " << st;
      }
      if (id == 0) out = w;
      EXPECT_TRUE((*c)->Close().ok());
    };
    std::vector<std::thread> others;
    for (int id = 1; id < trainers; ++id) others.emplace_back(trainer, id);
    trainer(0);
    for (auto& t : others) t.join();
    return out;
  }

  // The pservers' values, pulled whole by a new trainer.
  std::vector<float> PulledWhole(const std::string& job) {
    auto c = Client::Connect(ClientFor(job, "check"));
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return {};
    std::vector<float> w(kDim, 0.0f);
    EXPECT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
    Status st = (*c)->Initialize();
    EXPECT_TRUE(st.ok()) << st;
    st = (*c)->Pull().Wait();
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_TRUE((*c)->Close().ok());
    return w;
  }
  double Metric(const std::string& job, const std::string& name) {
    return PserverMetric(job, 0, name) + PserverMetric(job, 1, name);
  }
};

// Gradients and values that bfloat16 and float16 carry exactly: the model is exactly the float32
// one, and each pserver received 2 bytes a gradient (half of float32's).
TEST_F(WireTest, HalfPrecisionSendsHalfTheBytesAndKeepsWhatItCarriesExact) {
  constexpr int kSteps = 8;
  auto grad = [](int id, int j) { return static_cast<float>((j % 5) - 2) / 8 + static_cast<float>(id) / 16; };
  for (const char* wire : {"bf16", "f16"}) {
    SCOPED_TRACE(wire);
    const std::string job = std::string("wire-") + wire;
    auto w = Train(job, wire, "0.5", 2, kSteps, grad);
    ASSERT_EQ(w.size(), static_cast<size_t>(kDim));
    for (int j = 0; j < kDim; ++j) {
      float want = 0.5f;
      for (int s = 0; s < kSteps; ++s) want -= 0.5f * (grad(0, j) + grad(1, j)) / 2;
      ASSERT_EQ(w[j], want) << "element " << j;
    }
    // 2 trainers x 8 steps x 256 elements x 2 bytes, over both pservers (the blocks are placed by
    // hash: not always two on each).
    EXPECT_EQ(PserverMetric(job, 0, "tessera_pserver_received_bytes_total") +
                  PserverMetric(job, 1, "tessera_pserver_received_bytes_total"),
              2 * kSteps * kDim * 2);
  }
}

// Over TCP a reply in half precision is widened as its bytes come (WireCoder::ReplyDecoder, told
// by the transport after each receive; blocks of 512 KiB of bfloat16, runs of 256 KiB): however
// the bytes come in, the model is exactly the float32 one. (Which runs a receive leaves is the
// kernel's choice; ReplyDecoderTest covers every case.)
TEST_F(WireTest, HalfPrecisionRepliesOverTcpAreWidenedExactlyAsTheyCome) {
  constexpr int kBig = 1 << 20;
  constexpr int kSteps = 4;
  auto grad = [](int id, int j) { return static_cast<float>((j % 5) - 2) / 8 + static_cast<float>(id) / 16; };
  auto w = Train("wire-tcp-big", "bf16", "0.5", 2, kSteps, grad, "tcp", kBig, 1 << 18);
  ASSERT_EQ(w.size(), static_cast<size_t>(kBig));
  for (int j = 0; j < kBig; ++j) {
    float want = 0.5f;
    for (int s = 0; s < kSteps; ++s) want -= 0.5f * (grad(0, j) + grad(1, j)) / 2;
    ASSERT_EQ(w[j], want) << "element " << j;
  }
}

// Over TCP a large push in half precision is widened and scanned as its bytes come
// (pserver/push_widener.h). One pserver scans for the trainer (it waits for its step): a NaN in
// the push is found there, named within the parameter, and the step goes on without the
// gradient; the steps around it are exactly the float32 ones.
TEST_F(WireTest, AHalfPushWidenedAsItCameIsScannedOnTheWay) {
  constexpr int kBig = 1 << 20;  // 2 MB of bfloat16 a push
  constexpr int kBad = 1000000;
  const std::string job = "wire-widened";
  wire_ = *WireChoice::Parse("bf16");
  MakeJob(job, 1, "sync", "sgd:lr=0.5", 1 << 18, 1);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  ClientOptions o = ClientFor(job, "0");
  o.transport = "tcp";
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> w(kBig, 0.5f), g(kBig);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE((*c)->Initialize().ok());
  auto grad = [](int j) { return static_cast<float>((j % 5) - 2) / 8; };
  for (int s = 0; s < 3; ++s) {
    for (int j = 0; j < kBig; ++j) g[j] = grad(j);
    if (s == 1) g[kBad] = std::nanf("");
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 1;
    Handle h = (*c)->PushPullAndWait(grads);
    ASSERT_TRUE(h.Wait().ok()) << "step " << s;
    EXPECT_EQ(h.skipped(), s == 1) << "step " << s;
  }
  for (int j = 0; j < kBig; ++j) ASSERT_EQ(w[j], 0.5f - 2 * 0.5f * grad(j)) << "element " << j;
  EXPECT_TRUE((*c)->Close().ok());
  // The first push of its size is widened after it came: a push is widened as it comes only if no
  // larger than one whose segments the pserver has read (what it allocates stays the model's).
  EXPECT_EQ(PserverMetric(job, 0, "tessera_pserver_pushes_widened_as_they_came_total"), 2);
  EXPECT_EQ(PserverMetric(job, 0, "tessera_pserver_skipped_pushes_total"), 1);
  auto log = ReadFile(dir_ + "/pserver0.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("gradient for 'w' element " + std::to_string(kBad) +
                      " is not finite (NaN or infinity) (found by this pserver's scan)"),
            std::string::npos)
      << *log;
}

// A format per parameter: the one named travels in its own format, whatever the job's for the
// rest; a name no trainer declared is refused at Initialize, naming what was declared.
TEST_F(WireTest, AParameterNamedTravelsInItsOwnFormat) {
  constexpr int kSteps = 4;
  auto grad = [](int id, int j) { return static_cast<float>((j % 5) - 2) / 8 + static_cast<float>(id) / 16; };
  for (const auto& [wire, bytes] : {std::pair<std::string, int>{"sign,w=bf16", 2}, {"bf16,w=f32", 4}}) {
    SCOPED_TRACE(wire);
    const std::string job = "wire-per-param-" + std::to_string(bytes);
    auto w = Train(job, wire, "0.5", 2, kSteps, grad);
    ASSERT_EQ(w.size(), static_cast<size_t>(kDim));
    for (int j = 0; j < kDim; ++j) {
      float want = 0.5f;
      for (int s = 0; s < kSteps; ++s) want -= 0.5f * (grad(0, j) + grad(1, j)) / 2;
      ASSERT_EQ(w[j], want) << "element " << j << ": w was not sent in its own format (exact in both)";
    }
    EXPECT_EQ(Metric(job, "tessera_pserver_received_bytes_total"), 2 * kSteps * kDim * bytes);
  }
  wire_ = *WireChoice::Parse("bf16,ww=f32");
  MakeJob("wire-misspelt", 2, "sync", "sgd:lr=0.5", 64, 1);
  for (int p = 0; p < 2; ++p) StartPserver("wire-misspelt");
  ASSERT_TRUE(WaitForPservers("wire-misspelt", 2));
  auto c = Client::Connect(ClientFor("wire-misspelt", "0"));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> w(kDim, 0.5f);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
  Status st = (*c)->Initialize();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("'ww'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("declared: w"), std::string::npos) << st;
}

// A constant gradient, larger for later elements of each block. Top-k (a quarter) without error
// feedback would send the same 16 largest of each block every step and never move the rest; with
// it every element moves, and what was applied is nearly what was computed. With SGD a pull
// carries only the elements that changed since the trainer's last (top-k: a quarter, as index and
// value), and the trainer's copy is still exactly the pservers' values.
// Signs alike: every element would move by the same scale; with feedback the larger gradients
// move further.
TEST_F(WireTest, TopKAndSignPushesLoseNothingOverSteps) {
  constexpr int kSteps = 40;
  auto grad = [](int, int j) { return static_cast<float>(j % 64 + 16) / 64; };  // 0.25 .. 1.23
  for (const char* wire : {"topk:0.25", "sign"}) {
    SCOPED_TRACE(wire);
    const std::string job = std::string("wire-") + (wire[0] == 't' ? "topk" : "sign");
    auto w = Train(job, wire, "1", 1, kSteps, grad);
    ASSERT_EQ(w.size(), static_cast<size_t>(kDim));
    double applied = 0, computed = 0, max_off = 0;
    for (int j = 0; j < kDim; ++j) {
      const double moved = 0.5 - w[j];
      EXPECT_GT(moved, 0) << "element " << j << " never moved";
      // What is kept is a remainder of a few steps' gradient: top-k's is never negative (it only
      // holds back), a sign's may be (a step may send more than the element's gradient).
      if (wire[0] == 't') {
        EXPECT_LE(moved, kSteps * grad(0, j) + 1e-3) << "element " << j;
      } else {
        max_off = std::max(max_off, std::fabs(moved - kSteps * grad(0, j)));
      }
      applied += moved;
      computed += kSteps * grad(0, j);
    }
    std::printf("%s: applied %.1f of %.1f computed; a sign's remainder at most %.2f\n", wire, applied,
                computed, max_off);
    EXPECT_GT(applied, 0.85 * computed);
    EXPECT_LT(applied, 1.1 * computed);
    // One bit and one scale for 64 different gradients: the remainder is bounded, not small (it
    // grows as the square root of the steps while they are few; ~4.9 here, of ~30 computed).
    EXPECT_LT(max_off, 8.0) << "a sign push's remainder grew past what error feedback bounds";
    // The largest gradient of a block (79/64) moved further than the smallest (16/64), in
    // proportion.
    EXPECT_GT((0.5 - w[63]) / (0.5 - w[0]), 3.5);
    // Top-k: 16 of each block's 64 as index and float32 value (8 bytes); signs: a scale and 8
    // bytes of bits. 4 blocks a step, over both pservers.
    const double per_step = wire[0] == 't' ? 4 * 16 * 8 : 4 * (4 + 8);
    EXPECT_EQ(Metric(job, "tessera_pserver_received_bytes_total"), kSteps * per_step);
    // Pulls: top-k changed 16 elements of a block a step (8 bytes each: half of the block's 256
    // bytes); a sign changes every element, sent whole. Plus a first pull whole (Initialize).
    const double sent = Metric(job, "tessera_pserver_sent_bytes_total");
    if (wire[0] == 't') {
      EXPECT_LE(sent, kSteps * 4 * 16 * 8 + 2 * kDim * 4) << "pulls of changes only";
    } else {
      EXPECT_GE(sent, kSteps * kDim * 4);
    }
    EXPECT_EQ(PulledWhole(job), w) << "the trainer's copy, made of changes, is the pservers' values";
  }
}

// Replies of changes are shorter than the room the pserver allocated for the whole block: every
// transport sends what was written (gRPC and TCP here; shared memory above), and the trainer's
// copy is the pservers' values.
TEST_F(WireTest, PullsOfChangesTravelOverEveryTransport) {
  auto grad = [](int, int j) { return static_cast<float>(j % 64 + 16) / 64; };
  for (const char* transport : {"grpc", "tcp"}) {
    SCOPED_TRACE(transport);
    const std::string job = std::string("wire-") + transport;
    auto w = Train(job, "topk:0.25", "1", 1, 10, grad, transport);
    ASSERT_EQ(w.size(), static_cast<size_t>(kDim));
    EXPECT_LE(Metric(job, "tessera_pserver_sent_bytes_total"), 10 * 4 * 16 * 8 + 2 * kDim * 4);
    EXPECT_EQ(PulledWhole(job), w);
  }
}

}  // namespace
}  // namespace tessera::testing
