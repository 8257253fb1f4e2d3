// Bad input reaches the pserver and is refused with a message saying what and where, and
// nothing stored changes: unknown parameter, wrong size, wrong dtype, closed step, non-finite
// gradient, inconsistent payload, malformed header, another job's token, a stale epoch. Part of
// the transport conformance suite: every case runs over grpc, tcp and shm (the trainer and the
// raw connection both use the transport under test) and must give the same answer.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "job/wire_convert.h"
#include "ps/ps_fixture.h"
#include "tessera/data.pb.h"

namespace tessera::testing {
namespace {

class BadInputTest : public PsTest, public ::testing::WithParamInterface<TransportKind> {
 protected:
  void SetUp() override {
    PsTest::SetUp();
    cfg_ = MakeJob(kJob, 1, "sync", "sgd:lr=0.1", 64);
    StartPserver(kJob);
    ASSERT_TRUE(WaitForPservers(kJob, 1));
    auto opts = ClientFor(kJob, "0");
    opts.transport = TransportKindName(GetParam());
    auto c = Client::Connect(opts);
    ASSERT_TRUE(c.ok());
    client = std::move(*c);
    w.assign(100, 1.0f);
    ASSERT_TRUE(client->AddDense("w", w.data(), w.size()).ok());
    ASSERT_TRUE(client->AddSparse("emb", 4, InitializerConfig{}).ok());
    ASSERT_TRUE(client->Initialize().ok());
    // Two good steps, so step 0 is closed.
    for (int s = 0; s < 2; ++s) {
      std::vector<float> g(100, 0.5f);
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = 1;
      ASSERT_TRUE(client->PushPull(grads).Wait().ok());
    }
    auto kv = client_->Get(keys::Pserver(kJob, 0));
    pserver_epoch_ = kv->kvs[0].create_revision;
    auto t = client_->Get(keys::Trainer(kJob, "0"));
    trainer_epoch_ = t->kvs[0].create_revision;
    conn_ = RawConnection(kJob, 0, GetParam());
    ASSERT_NE(conn_, nullptr);
    snapshot_ = Values();
  }

  std::vector<float> Values() {
    std::vector<float> copy(100);
    EXPECT_TRUE(client->Pull().Wait().ok());
    std::copy(w.begin(), w.end(), copy.begin());
    return copy;
  }

  // A well-formed push request of block 0 ("w" holds 64 elements there), to be spoiled.
  wire::DataRequest GoodPush() {
    wire::DataRequest r;
    r.set_op(wire::DataRequest::DATA);
    r.set_job_token(cfg_.token);
    r.set_pserver_index(0);
    r.set_pserver_epoch(pserver_epoch_);
    r.set_trainer("0");
    r.set_trainer_epoch(trainer_epoch_);
    r.set_step(client->step());
    r.set_is_push(true);
    r.set_samples(1);
    auto* s = r.add_push();
    s->set_param("w");
    s->set_block(0);
    s->set_count(64);
    s->set_dtype(wire::FLOAT32);
    return r;
  }

  wire::DataReply Send(const std::string& header, const std::vector<float>& payload) {
    ConstBuffer b{payload.data(), payload.size() * sizeof(float)};
    auto r = conn_->Call(header, std::span<const ConstBuffer>(&b, payload.empty() ? 0 : 1), {},
                         std::chrono::seconds(10));
    EXPECT_TRUE(r.ok()) << r.status();
    wire::DataReply reply;
    EXPECT_TRUE(reply.ParseFromArray(r->header.data(), static_cast<int>(r->header.size())));
    return reply;
  }

  void ExpectRefused(const wire::DataReply& r, const std::string& needle) {
    EXPECT_NE(r.code(), 0) << needle;
    EXPECT_NE(r.message().find(needle), std::string::npos) << "message: " << r.message();
    EXPECT_EQ(Values(), snapshot_) << "stored values changed after: " << r.message();
  }

  const std::string kJob = "bad";
  JobConfig cfg_;
  std::unique_ptr<Client> client;
  std::vector<float> w;
  int64_t pserver_epoch_ = 0, trainer_epoch_ = 0;
  std::unique_ptr<ClientConnection> conn_;
  std::vector<float> snapshot_;
};

TEST_P(BadInputTest, UnknownParameter) {
  auto r = GoodPush();
  r.mutable_push(0)->set_param("nope");
  ExpectRefused(Send(r.SerializeAsString(), std::vector<float>(64, 1)), "unknown parameter 'nope'");
}

TEST_P(BadInputTest, WrongSize) {
  auto r = GoodPush();
  r.mutable_push(0)->set_count(10);
  ExpectRefused(Send(r.SerializeAsString(), std::vector<float>(10, 1)),
                "'w' block 0: expected 64 elements, got 10");
}

TEST_P(BadInputTest, WrongDtype) {
  auto r = GoodPush();
  r.mutable_push(0)->set_dtype(wire::FLOAT64);
  ExpectRefused(Send(r.SerializeAsString(), std::vector<float>(128, 1)),
                "parameter 'w': dtype FLOAT64 is not supported");
}

TEST_P(BadInputTest, PushForAClosedStep) {
  auto r = GoodPush();
  r.set_step(0);
  auto reply = Send(r.SerializeAsString(), std::vector<float>(64, 1));
  EXPECT_EQ(reply.reason(), wire::DataReply::STEP_CLOSED);
  EXPECT_EQ(reply.resume_step(), 2);
  ExpectRefused(reply, "step 0 is closed");
}

TEST_P(BadInputTest, NonFiniteGradientNamesTheParameter) {
  // Through the client: the trainer finds it before sending and the step goes on without its
  // gradient (the job's default policy, skip).
  std::vector<float> full(100, 0.0f);
  full[99] = -INFINITY;
  Gradients grads;
  grads.Dense("w", full);
  grads.samples = 1;
  Handle h = client->Push(grads);
  Status s = h.Wait();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(h.skipped());
  EXPECT_EQ(Values(), snapshot_) << "a dropped gradient changed the values";
  // A request that skips the trainer's check is refused by the pserver, naming the place.
  auto r = GoodPush();
  std::vector<float> g(64, 1.0f);
  g[17] = std::nanf("");
  ExpectRefused(Send(r.SerializeAsString(), g), "gradient for 'w' element 17 is not finite");
  g[17] = INFINITY;
  ExpectRefused(Send(r.SerializeAsString(), g), "not finite");
}

TEST_P(BadInputTest, PayloadThatDoesNotMatchTheHeader) {
  auto r = GoodPush();
  ExpectRefused(Send(r.SerializeAsString(), std::vector<float>(63, 1)),
                "payload has 252 bytes but the header describes 256");
}

TEST_P(BadInputTest, MalformedHeaderWrongJobAndStaleEpoch) {
  ExpectRefused(Send("\xff\xff\xff garbage", {}), "malformed request header");
  auto r = GoodPush();
  r.set_job_token("someone-else");
  ExpectRefused(Send(r.SerializeAsString(), std::vector<float>(64, 1)), "another job");
  r = GoodPush();
  r.set_pserver_epoch(pserver_epoch_ - 1);
  auto reply = Send(r.SerializeAsString(), std::vector<float>(64, 1));
  EXPECT_EQ(reply.reason(), wire::DataReply::STALE_EPOCH);
  ExpectRefused(reply, "stale epoch");
}

TEST_P(BadInputTest, RetriedPushIsAppliedOnce) {
  // The same push (trainer 0, same epoch, same step) arrives twice, as after a lost reply.
  auto r = GoodPush();
  std::string header = r.SerializeAsString();
  std::vector<float> g(64, 1.0f);
  auto first = Send(header, g);
  ASSERT_EQ(first.code(), 0) << first.message();
  auto again = Send(header, g);
  ASSERT_EQ(again.code(), 0) << again.message();
  // Block 0 moved by lr * g once (0.1), not twice.
  std::vector<float> now(100);
  wire::DataRequest pull;
  pull.set_op(wire::DataRequest::DATA);
  pull.set_job_token(cfg_.token);
  pull.set_pserver_index(0);
  pull.set_pserver_epoch(pserver_epoch_);
  pull.set_trainer("0");
  pull.set_trainer_epoch(trainer_epoch_);
  pull.set_need(client->step() + 1);
  *pull.add_pull() = r.push(0);
  MutableBuffer out{now.data(), 64 * sizeof(float)};
  auto reply = conn_->Call(pull.SerializeAsString(), {}, std::span<const MutableBuffer>(&out, 1),
                           std::chrono::seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  for (int i = 0; i < 64; ++i) ASSERT_FLOAT_EQ(now[i], snapshot_[i] - 0.1f) << i;
}

TEST_P(BadInputTest, ClientSideChecksNameTheParameter) {
  std::vector<float> small(5);
  Gradients g1;
  g1.Dense("w", small);
  g1.samples = 1;
  Status s = client->Push(g1).Wait();
  EXPECT_NE(s.message().find("gradient of 'w' has 5 elements, the parameter has 100"), std::string::npos)
      << s;
  Gradients g2;
  g2.Dense("ghost", small);
  g2.samples = 1;
  EXPECT_NE(client->Push(g2).Wait().message().find("unknown dense parameter 'ghost'"), std::string::npos);
  std::vector<uint64_t> keys{1, 2};
  std::vector<float> rows(3);
  Gradients g3;
  g3.Sparse("emb", keys, rows);
  g3.samples = 1;
  EXPECT_NE(client->Push(g3).Wait().message().find("2 keys need 8 gradient values, not 3"),
            std::string::npos);
  EXPECT_EQ(client->AddDense("late", small.data(), small.size()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Values(), snapshot_);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A trainer whose lease is gone (here: revoked) is told so on its next operation, instead of
// going on as a member the job no longer counts.
TEST_P(BadInputTest, LostLeaseIsReportedOnTheNextOperation) {
  auto t = client_->Get(keys::Trainer(kJob, "0"));
  ASSERT_TRUE(t.ok() && !t->kvs.empty());
  ASSERT_TRUE(client_->RevokeLease(t->kvs[0].lease).ok());
  Status s;
  ASSERT_TRUE(WaitUntil(
      [&] {
        s = client->Pull().Wait();
        return !s.ok();
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("lease was lost"), std::string::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(Transports, BadInputTest,
                         ::testing::Values(TransportKind::kGrpc, TransportKind::kTcp, TransportKind::kShm),
                         [](const auto& info) { return TransportKindName(info.param); });

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// An INIT whose segments list sparse rows before a dense block: the pserver once skipped the
// sparse segment without moving past its bytes, and so loaded the dense values from the wrong
// place. Every segment is now read the same way: INIT carries dense blocks only, and anything
// else is refused before a value is set.
TEST_F(PsTest, AnInitWithASparseSegmentFirstIsRefusedAndNothingIsLoaded) {
  const std::string job = "init-order";
  auto cfg = MakeJob(job, 1, "sync", "sgd:lr=0.1", 64);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto conn = RawConnection(job, 0);
  ASSERT_NE(conn, nullptr);
  const int64_t epoch = client_->Get(keys::Pserver(job, 0))->kvs[0].create_revision;
  auto request = [&](wire::DataRequest::Op op) {
    wire::DataRequest r;
    r.set_op(op);
    r.set_job_token(cfg.token);
    r.set_pserver_index(0);
    r.set_pserver_epoch(epoch);
    r.set_trainer("0");
    return r;
  };
  auto call = [&](const wire::DataRequest& r, const std::vector<float>& payload,
                  std::vector<float>* out = nullptr) {
    ConstBuffer b{payload.data(), payload.size() * sizeof(float)};
    std::vector<float> got(out ? 64 : 0);
    MutableBuffer mb{got.data(), got.size() * sizeof(float)};
    auto res = conn->Call(r.SerializeAsString(), std::span<const ConstBuffer>(&b, payload.empty() ? 0 : 1),
                          std::span<const MutableBuffer>(&mb, out ? 1 : 0), std::chrono::seconds(10));
    EXPECT_TRUE(res.ok()) << res.status();
    wire::DataReply reply;
    if (res.ok()) reply.ParseFromArray(res->header.data(), static_cast<int>(res->header.size()));
    if (out) *out = got;
    return reply;
  };
  auto init = request(wire::DataRequest::INIT);
  auto* w = init.add_params();
  w->set_name("w");
  w->set_size(64);
  *w->mutable_optimizer() = ToWire(cfg.optimizer);
  auto* emb = init.add_params();
  emb->set_name("emb");
  emb->set_sparse(true);
  emb->set_dim(4);
  *emb->mutable_optimizer() = ToWire(cfg.optimizer);
  auto* rows = init.add_push();
  rows->set_param("emb");
  rows->set_block(-1);
  rows->set_count(1);
  rows->add_keys(7);
  auto* block = init.add_push();
  block->set_param("w");
  block->set_block(0);
  block->set_count(64);
  std::vector<float> payload(4, 9.0f);  // the sparse row's bytes first
  for (int i = 0; i < 64; ++i) payload.push_back(static_cast<float>(i));
  auto refused = call(init, payload);
  EXPECT_NE(refused.code(), 0);
  EXPECT_NE(refused.message().find("INIT carries dense blocks only"), std::string::npos) << refused.message();
  // The same INIT without the sparse segment loads exactly the dense values given.
  init.mutable_push()->DeleteSubrange(0, 1);
  payload.erase(payload.begin(), payload.begin() + 4);
  ASSERT_EQ(call(init, payload).code(), 0);
  ASSERT_EQ(call(request(wire::DataRequest::INIT_DONE), {}).code(), 0);
  auto pull = request(wire::DataRequest::DATA);
  *pull.add_pull() = *block;
  std::vector<float> values;
  ASSERT_EQ(call(pull, {}, &values).code(), 0);
  EXPECT_EQ(values, payload);
}

}  // namespace
}  // namespace tessera::testing
