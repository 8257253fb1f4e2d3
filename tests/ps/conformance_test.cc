// Transport conformance: the same scenarios over every data-plane transport (grpc, tcp, shm),
// against real pserver processes and a real etcd, each checked against values computed here
// with the pservers' own optimizer kernel, bit for bit, so every transport gives identical
// results: dense push and pull, sparse rows, a sync barrier over two trainers, a stale epoch, a
// pserver killed in the middle of large transfers, and a trainer killed in the middle of one.
// tcp and grpc run again in a job created with --tls (mutual TLS, certificates of the job's CA).
// (BadInputTest runs its refusals over every transport too.)
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "ps/ps_fixture.h"
#include "pserver/optimizer.h"
#include "tessera/data.pb.h"

namespace tessera::testing {
namespace {

struct Conformance {
  TransportKind kind;
  bool tls = false;
};

class ConformanceTest : public PsTest, public ::testing::WithParamInterface<Conformance> {
 protected:
  void SetUp() override {
    PsTest::SetUp();
    tls_ = GetParam().tls;
  }
  TransportKind kind() const { return GetParam().kind; }
  ClientOptions Options(const std::string& job, const std::string& id = "") {
    auto o = ClientFor(job, id);
    o.transport = TransportKindName(kind());
    return o;
  }
  std::unique_ptr<Client> Connect(const std::string& job, const std::string& id = "") {
    auto c = Client::Connect(Options(job, id));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // The trainer's registration names the transport it uses to every pserver.
  void ExpectRegisteredTransport(const std::string& job, const std::string& trainer, int pservers) {
    auto kv = client_->Get(keys::Trainer(job, trainer));
    ASSERT_TRUE(kv.ok() && !kv->kvs.empty());
    auto j = nlohmann::json::parse(kv->kvs[0].value);
    for (int p = 0; p < pservers; ++p) {
      EXPECT_EQ(j["transport"][std::to_string(p)], TransportKindName(kind())) << kv->kvs[0].value;
    }
  }
};

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_P(ConformanceTest, DenseValuesArriveBitForBit) {
  const std::string job = "dense";
  auto cfg = MakeJob(job, 2, "sync", "momentum:lr=0.1,momentum=0.9", 64);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  auto client = Connect(job);
  ASSERT_NE(client, nullptr);
  const size_t n = 1000;
  std::vector<float> w(n), ref(n), vel(n, 0.0f);
  for (size_t i = 0; i < n; ++i) w[i] = ref[i] = 0.001f * static_cast<float>(i) - 0.3f;
  ASSERT_TRUE(client->AddDense("w", w.data(), n).ok());
  ASSERT_TRUE(client->Initialize().ok());
  ExpectRegisteredTransport(job, client->trainer_id(), 2);
  std::vector<float> g(n);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < n; ++i) g[i] = 0.25f * static_cast<float>((i + step) % 7) - 0.5f;
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 3;
    ASSERT_TRUE(client->PushPull(grads).Wait().ok());
    // The same update, block by block, with the pservers' kernel.
    for (size_t b = 0; b < n; b += 64) {
      size_t len = std::min<size_t>(64, n - b);
      ApplyUpdate(cfg.optimizer, ref.data() + b, g.data() + b, 1.0f / 3.0f, len, vel.data() + b, nullptr,
                  step + 1);
    }
    ASSERT_TRUE(BitEqual(w, ref)) << "step " << step << ": w[0]=" << w[0] << " expected " << ref[0];
  }
}

TEST_P(ConformanceTest, SparseRowsArriveBitForBit) {
  const std::string job = "sparse";
  auto cfg = MakeJob(job, 2, "async", "adagrad:lr=0.5", 64);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  auto client = Connect(job);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->AddSparse("emb", 4, InitializerConfig{}).ok());  // rows start at zero
  ASSERT_TRUE(client->Initialize().ok());
  std::vector<uint64_t> keys = {5, 900001, 5, 12, 1ull << 40};
  std::vector<float> grads(keys.size() * 4);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.1f * static_cast<float>(i) - 0.7f;
  Gradients g;
  g.Sparse("emb", keys, grads);
  g.samples = 2;
  ASSERT_TRUE(client->Push(g).Wait().ok());
  std::vector<uint64_t> ask = {12, 5, 77, 1ull << 40, 900001};
  std::vector<float> got(ask.size() * 4, -1.0f);
  ASSERT_TRUE(client->SparsePull("emb", ask, got.data()).Wait().ok());
  // Reference: duplicates summed in order, one adagrad update per row, untouched rows zero.
  auto row = [&](uint64_t key) {
    std::vector<float> sum(4, 0.0f), w(4, 0.0f), acc(4, 0.0f);
    bool touched = false;
    for (size_t k = 0; k < keys.size(); ++k) {
      if (keys[k] != key) continue;
      for (int j = 0; j < 4; ++j) sum[j] += grads[k * 4 + j];
      touched = true;
    }
    InitState(cfg.optimizer, acc.data(), nullptr, 4);
    if (touched) ApplyUpdate(cfg.optimizer, w.data(), sum.data(), 0.5f, 4, acc.data(), nullptr, 1);
    return w;
  };
  std::vector<float> ref;
  for (uint64_t k : ask) {
    auto r = row(k);
    ref.insert(ref.end(), r.begin(), r.end());
  }
  EXPECT_TRUE(BitEqual(got, ref)) << "row of 12: " << got[0] << " expected " << ref[0];
}

TEST_P(ConformanceTest, SyncBarrierSumsBothTrainersInIdOrder) {
  const std::string job = "barrier";
  auto cfg = MakeJob(job, 1, "sync", "sgd:lr=0.05,weight_decay=0.01", 32, /*min_trainers=*/2);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  const size_t n = 100;
  std::vector<float> w0(n, 0.25f), w1(n, 0.25f), ref(n, 0.25f);
  auto a = Connect(job, "0");
  auto b = Connect(job, "1");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AddDense("w", w0.data(), n).ok());
  ASSERT_TRUE(b->AddDense("w", w1.data(), n).ok());
  std::thread tb([&] { EXPECT_TRUE(b->Initialize().ok()); });
  ASSERT_TRUE(a->Initialize().ok());
  tb.join();
  for (int step = 0; step < 4; ++step) {
    std::vector<float> ga(n), gb(n), sum(n);
    for (size_t i = 0; i < n; ++i) {
      ga[i] = 0.3f * static_cast<float>(i % 5) + static_cast<float>(step);
      gb[i] = -0.7f * static_cast<float>(i % 3) + 0.1f;
      sum[i] = ga[i] + gb[i];  // trainer "0" first, then "1"
    }
    Gradients x, y;
    x.Dense("w", ga);
    x.samples = 1;
    y.Dense("w", gb);
    y.samples = 3;
    Handle hb;
    std::thread pb([&] { hb = b->PushPull(y); });
    Handle ha = a->PushPull(x);
    pb.join();
    ASSERT_TRUE(ha.Wait().ok());
    ASSERT_TRUE(hb.Wait().ok());
    for (size_t s = 0; s < n; s += 32) {
      ApplyUpdate(cfg.optimizer, ref.data() + s, sum.data() + s, 0.25f, std::min<size_t>(32, n - s), nullptr,
                  nullptr, step + 1);
    }
    ASSERT_TRUE(BitEqual(w0, ref)) << "step " << step << ": " << w0[1] << " vs " << ref[1];
    ASSERT_TRUE(BitEqual(w1, ref)) << "step " << step;
  }
}

TEST_P(ConformanceTest, AStaleEpochIsRefusedAndNothingChanges) {
  const std::string job = "stale";
  auto cfg = MakeJob(job, 1, "async", "sgd:lr=0.1", 64);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto client = Connect(job, "0");
  ASSERT_NE(client, nullptr);
  std::vector<float> w(64, 2.0f), g(64, 1.0f);
  ASSERT_TRUE(client->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE(client->Initialize().ok());
  auto kv = client_->Get(keys::Pserver(job, 0));
  auto trainer = client_->Get(keys::Trainer(job, "0"));
  wire::DataRequest req;
  req.set_op(wire::DataRequest::DATA);
  req.set_job_token(cfg.token);
  req.set_pserver_epoch(kv->kvs[0].create_revision - 1);  // an older incarnation
  req.set_trainer("0");
  req.set_trainer_epoch(trainer->kvs[0].create_revision);
  req.set_is_push(true);
  req.set_samples(1);
  auto* seg = req.add_push();
  seg->set_param("w");
  seg->set_block(0);
  seg->set_count(64);
  ConstBuffer payload{g.data(), 64 * sizeof(float)};
  auto conn = RawConnection(job, 0, kind());
  ASSERT_NE(conn, nullptr);
  auto r = conn->Call(req.SerializeAsString(), {&payload, 1}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  wire::DataReply reply;
  ASSERT_TRUE(reply.ParseFromArray(r->header.data(), static_cast<int>(r->header.size())));
  EXPECT_EQ(reply.reason(), wire::DataReply::STALE_EPOCH) << reply.message();
  EXPECT_NE(reply.message().find("stale epoch"), std::string::npos) << reply.message();
  ASSERT_TRUE(client->Pull().Wait().ok());
  for (float v : w) ASSERT_EQ(v, 2.0f);  // the refused push changed nothing
}

// Pushes of 16 MiB run back to back while the pserver is killed with SIGKILL, so the kill lands
// in the middle of a transfer; a replacement takes the index, the client retries into it
// (re-initializing it from its own copy), and every element still has the same value: no
// push was applied in part.
TEST_P(ConformanceTest, PserverKilledMidTransferIsReplacedAndNoPushIsAppliedInPart) {
  const std::string job = "killps";
  auto cfg = MakeJob(job, 1, "async", "sgd:lr=0.001", 1 << 20);
  size_t p = StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto client = Connect(job, "0");
  ASSERT_NE(client, nullptr);
  const size_t n = size_t{4} << 20;  // 16 MiB
  std::vector<float> w(n, 1.0f), g(n, 1.0f);
  ASSERT_TRUE(client->AddDense("w", w.data(), n).ok());
  ASSERT_TRUE(client->Initialize().ok());
  std::atomic<int> pushed{0};
  std::atomic<bool> stop{false};
  Status loop_error;
  std::thread pusher([&] {
    for (int i = 0; i < 100000 && !stop; ++i) {
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = 1;
      Status s = client->Push(grads).Wait();
      if (!s.ok()) {
        loop_error = s;
        return;
      }
      ++pushed;
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return pushed >= 3 || !loop_error.ok(); }, std::chrono::seconds(60)));
  procs_[p]->Kill();
  const int at_kill = pushed;
  StartPserver(job);
  bool moved = WaitUntil([&] { return pushed >= at_kill + 3 || !loop_error.ok(); }, std::chrono::seconds(90));
  stop = true;
  pusher.join();
  ASSERT_TRUE(loop_error.ok()) << loop_error;
  ASSERT_TRUE(moved) << "pushes did not resume after the replacement";
  ASSERT_TRUE(client->Pull().Wait().ok());
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(w[i], w[0]) << "element " << i << " differs: a push applied in part";
  EXPECT_LT(w[0], 1.0f);
}

// A 24 MiB model on one pserver, in an async job: with ClientOptions::pipeline (the default) its
// pushes, pushes with a pull, and pulls travel in parts of 4 MiB, two at a time, and the pserver
// sees the trainer's requests overlap; the values (after a push-and-pull, and at the end) are the
// bits the same job gets with pipeline off (whole requests, one at a time, no overlap).
TEST_P(ConformanceTest, LargePushesAndPullsGoInPartsTwoAtATimeWithTheBitsOfWholeOnes) {
  const size_t n = size_t{6} << 20;
  std::vector<float> after_pushpull;  // the values the push-and-pull of step 3 brought back
  auto run = [&](const std::string& job, bool pipeline, double* seen) -> std::vector<float> {
    MakeJob(job, 1, "async", "adam:lr=0.01", 1 << 18);  // blocks of 1 MiB
    const size_t p = StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, 1));
    auto o = Options(job, "0");
    o.pipeline = pipeline;
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return {};
    std::vector<float> w(n), g(n);
    for (size_t i = 0; i < n; ++i) w[i] = std::sin(0.001f * static_cast<float>(i));
    EXPECT_TRUE((*c)->AddDense("w", w.data(), n).ok());
    EXPECT_TRUE((*c)->Initialize().ok());
    for (int step = 0; step < 6; ++step) {
      for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.37f * static_cast<float>(i % 1000) + step);
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = 3;
      // Pushes alone and pushes with a pull (the pull after every piece of the push).
      Handle h = step % 2 == 0 ? (*c)->Push(grads) : (*c)->PushPull(grads);
      EXPECT_TRUE(h.Wait().ok()) << "step " << step;
      if (step == 3) after_pushpull = w;
    }
    std::fill(w.begin(), w.end(), 0.0f);
    EXPECT_TRUE((*c)->Pull().Wait().ok());
    *seen = PserverMetric(job, 0, "tessera_pserver_overlapped_requests_total");
    c->reset();
    procs_[p]->Terminate(std::chrono::seconds(5));
    return w;
  };
  double whole_overlapped = -1, parts_overlapped = -1;
  const auto whole = run("whole", false, &whole_overlapped);
  const auto whole_step3 = after_pushpull;
  const auto parts = run("parts", true, &parts_overlapped);
  ASSERT_EQ(whole.size(), n);
  EXPECT_TRUE(BitEqual(whole_step3, after_pushpull)) << "a push-and-pull in parts brought back other values";
  EXPECT_NE(whole[12345], std::sin(0.001f * 12345)) << "the pushes changed nothing";
  EXPECT_TRUE(BitEqual(whole, parts)) << "pushes and pulls in parts changed the values";
  EXPECT_EQ(whole_overlapped, 0) << "one trainer, one request at a time";
  EXPECT_GT(parts_overlapped, 0) << "the parts never overlapped on the pserver";
}

// A trainer pushing 32 MiB at a time is killed with SIGKILL mid-transfer: the pserver drops the
// cut-short message, keeps serving the other trainer, and holds only whole messages. An async
// push that large travels in pieces of one 4 MiB block each (ClientOptions::pipeline), each
// applied as it arrives: every block holds a whole number of pushes, and blocks differ by at most
// the push the kill cut short.
TEST_P(ConformanceTest, TrainerKilledMidTransferLeavesOnlyWholePushes) {
  const std::string job = "killtr";
  auto cfg = MakeJob(job, 1, "async", "sgd:lr=0.5", 1 << 20);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  const size_t n = size_t{8} << 20;  // 32 MiB
  SpawnOptions o;
  o.argv = {BuildPath("tests/push_loop"),
            "--etcd",
            server_->endpoint(),
            "--job",
            job,
            "--id",
            "pusher",
            "--transport",
            TransportKindName(kind()),
            "--floats",
            std::to_string(n)};
  o.env = TlsEnv(job);
  o.log_path = dir_ + "/push_loop.log";
  auto pusher = Subprocess::Spawn(o);
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->WaitForOutput("PUSHED 2", std::chrono::seconds(90))) << (*pusher)->Output();
  (*pusher)->Kill();
  auto client = Connect(job, "checker");
  ASSERT_NE(client, nullptr);
  std::vector<float> w(n, 0.0f);
  ASSERT_TRUE(client->AddDense("w", w.data(), n).ok());
  ASSERT_TRUE(client->Initialize().ok());
  ASSERT_TRUE(client->Pull().Wait().ok());
  // Every push subtracts 0.5 from every element: a whole number of them in each block (1M
  // elements), the same in all its elements.
  constexpr size_t kBlock = size_t{1} << 20;
  float fewest = 1e9f, most = -1e9f;
  for (size_t b = 0; b < n / kBlock; ++b) {
    const float pushes = (1.0f - w[b * kBlock]) / 0.5f;
    EXPECT_EQ(pushes, std::floor(pushes)) << "block " << b << ": w = " << w[b * kBlock];
    fewest = std::min(fewest, pushes);
    most = std::max(most, pushes);
    for (size_t i = b * kBlock; i < (b + 1) * kBlock; ++i)
      ASSERT_EQ(w[i], w[b * kBlock]) << "element " << i << ": a message applied in part";
  }
  EXPECT_GE(fewest, 2.0f);
  EXPECT_LE(most - fewest, 1.0f) << "blocks more than one push apart";
  std::vector<float> g(n, 0.0f);
  Gradients grads;
  grads.Dense("w", g);
  grads.samples = 1;
  EXPECT_TRUE(client->PushPull(grads).Wait().ok()) << "the pserver stopped serving after the cut transfer";
}

// `tessera status` shows what each pserver serves and which transport each trainer took.
TEST_F(PsTest, StatusShowsTheDataPlaneOfEveryMember) {
  const std::string job = "status";
  MakeJob(job, 1, "async", "sgd:lr=0.1", 64);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::vector<float>> ws(3, std::vector<float>(10, 0.0f));
  const std::vector<std::string> kinds = {"tcp", "shm", "auto"};
  for (size_t i = 0; i < kinds.size(); ++i) {
    auto o = ClientFor(job, "t-" + kinds[i]);
    o.transport = kinds[i];
    auto c = Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->AddDense("w", ws[i].data(), 10).ok());
    ASSERT_TRUE((*c)->Initialize().ok());
    clients.push_back(std::move(*c));
  }
  SpawnOptions o;
  o.argv = {BuildPath("src/tessera"), "status", "--etcd", server_->endpoint(), "--job", job};
  o.log_path = dir_ + "/status.log";
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ((*p)->Wait(std::chrono::seconds(30)), 0) << (*p)->Output();
  std::string out = (*p)->Output();
  EXPECT_NE(out.find("data plane: serves grpc 127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find(", shm @tessera-shm-"), std::string::npos) << out;
  EXPECT_NE(out.find(", tcp 127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("data plane: uses tcp to pserver 0 (asked for tcp)"), std::string::npos) << out;
  EXPECT_NE(out.find("data plane: uses shm to pserver 0 (asked for shm)"), std::string::npos) << out;
  EXPECT_NE(out.find("data plane: uses shm to pserver 0 (asked for auto)"), std::string::npos) << out;
  // An explicit transport the pserver does not serve fails at once, saying what it serves.
  const std::string only = "onlytcp";
  MakeJob(only, 1, "async", "sgd:lr=0.1", 64);
  StartPserver(only, 2, "tcp");
  ASSERT_TRUE(WaitForPservers(only, 1));
  auto co = ClientFor(only, "x");
  co.transport = "shm";
  auto c = Client::Connect(co);
  ASSERT_TRUE(c.ok());
  std::vector<float> w(10, 0.0f);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), 10).ok());
  Status s = (*c)->Initialize();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("transport shm was asked for, but the pserver offers tcp"), std::string::npos)
      << s;
}

// A thread that waits runs a request the link has not started yet itself; one that never waits
// must still see its operations finish (the link thread runs them): check done() only.
TEST_F(PsTest, OperationsFinishWithoutAnyoneWaitingOnThem) {
  const std::string job = "nowait";
  MakeJob(job, 2, "sync", "sgd:lr=0.5", 64);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  auto c = Client::Connect(ClientFor(job));
  ASSERT_TRUE(c.ok());
  std::vector<float> w(200, 1.0f), g(200, 1.0f);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE((*c)->Initialize().ok());
  for (int step = 0; step < 3; ++step) {
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 1;
    Handle h = (*c)->PushPull(grads);
    ASSERT_TRUE(WaitUntil([&] { return h.done(); }, std::chrono::seconds(30), std::chrono::milliseconds(1)))
        << "step " << step << " did not finish without a Wait()";
    EXPECT_EQ(h.version(), step + 1);
  }
  for (float v : w) ASSERT_EQ(v, 1.0f - 3 * 0.5f);
}

INSTANTIATE_TEST_SUITE_P(Transports, ConformanceTest,
                         ::testing::Values(Conformance{TransportKind::kGrpc},
                                           Conformance{TransportKind::kTcp}, Conformance{TransportKind::kShm},
                                           Conformance{TransportKind::kTcp, true},
                                           Conformance{TransportKind::kGrpc, true}),
                         [](const auto& info) {
                           return TransportKindName(info.param.kind) + (info.param.tls ? "_tls" : "");
                         });

}  // namespace
}  // namespace tessera::testing
