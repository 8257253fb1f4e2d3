// Job credentials at a live pserver, over every transport: requests from a process without the
// job's secret, or with another job's, are refused (init, push, pull, status) before anything is
// read or changed; the job's parameters and version stay as they were; the refusals are counted
// in the pserver's /metrics. A trainer given another job's secret file is refused at connect,
// and one given its own job's file trains.
#include <gtest/gtest.h>

#include "job/wire_convert.h"
#include "ps/ps_fixture.h"
#include "security/job_secret.h"

namespace tessera::testing {
namespace {

class AuthTest : public PsTest, public ::testing::WithParamInterface<TransportKind> {
 protected:
  void SetUp() override {
    PsTest::SetUp();
    cfg_ = MakeJob(kJob, 1, "sync", "sgd:lr=0.1", 64);
    MakeJob(kOther, 1, "sync", "sgd:lr=0.1", 64);
    StartPserver(kJob);
    ASSERT_TRUE(WaitForPservers(kJob, 1));
    auto c = Client::Connect(ClientFor(kJob, "0"));
    ASSERT_TRUE(c.ok()) << c.status();
    client_a_ = std::move(*c);
    w_.assign(100, 1.0f);
    ASSERT_TRUE(client_a_->AddDense("w", w_.data(), w_.size()).ok());
    ASSERT_TRUE(client_a_->Initialize().ok());
    std::vector<float> g(100, 0.5f);
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 1;
    ASSERT_TRUE(client_a_->PushPull(grads).Wait().ok());
    pserver_epoch_ = client_->Get(keys::Pserver(kJob, 0))->kvs[0].create_revision;
  }

  std::vector<float> Values() {
    EXPECT_TRUE(client_a_->Pull().Wait().ok());
    return w_;
  }

  wire::DataRequest Request(wire::DataRequest::Op op) {
    wire::DataRequest r;
    r.set_op(op);
    r.set_job_token(cfg_.token);  // the token is no secret: it is in the configuration
    r.set_pserver_index(0);
    r.set_pserver_epoch(pserver_epoch_);
    r.set_trainer("0");
    return r;
  }

  double RefusedCount() { return PserverMetric(kJob, 0, "tessera_pserver_auth_refused_total"); }

  const std::string kJob = "auth-a", kOther = "auth-b";
  JobConfig cfg_;
  std::unique_ptr<Client> client_a_;
  std::vector<float> w_;
  int64_t pserver_epoch_ = 0;
};

TEST_P(AuthTest, RequestsWithoutTheJobSecretOrWithAnotherJobsAreRefusedAndChangeNothing) {
  const std::vector<float> before = Values();
  const int64_t version = client_a_->step();
  const double refused_before = RefusedCount();
  ASSERT_GE(refused_before, 0);

  std::vector<wire::DataRequest> requests;
  auto init = Request(wire::DataRequest::INIT);
  auto* p = init.add_params();
  p->set_name("w");
  p->set_size(100);
  *p->mutable_optimizer() = ToWire(cfg_.optimizer);
  auto* b = init.add_push();
  b->set_param("w");
  b->set_block(0);
  b->set_count(64);
  requests.push_back(init);
  auto push = Request(wire::DataRequest::DATA);
  push.set_is_push(true);
  push.set_step(client_a_->step());
  push.set_samples(1);
  auto* s = push.add_push();
  s->set_param("w");
  s->set_block(0);
  s->set_count(64);
  s->set_dtype(wire::FLOAT32);
  requests.push_back(push);
  auto pull = Request(wire::DataRequest::DATA);
  auto* q = pull.add_pull();
  q->set_param("w");
  q->set_block(0);
  q->set_count(64);
  requests.push_back(pull);
  requests.push_back(Request(wire::DataRequest::STATUS));

  const std::vector<float> payload(64, 1000.0f);
  std::vector<float> out(64, -1.0f);
  int with_other_secret = 0;
  for (const auto& secret : {security::JobSecret(), SecretOf(kOther)}) {
    for (const auto& r : requests) {
      auto conn = RawConnection(kJob, 0, GetParam(), secret);
      ASSERT_NE(conn, nullptr);
      const bool has_payload = r.op() == wire::DataRequest::INIT || r.is_push();
      ConstBuffer in{payload.data(), payload.size() * sizeof(float)};
      MutableBuffer o{out.data(), out.size() * sizeof(float)};
      auto res = conn->Call(r.SerializeAsString(), std::span<const ConstBuffer>(&in, has_payload ? 1 : 0),
                            std::span<const MutableBuffer>(&o, 1), std::chrono::seconds(20));
      ASSERT_FALSE(res.ok()) << "op " << r.op() << " was answered without the job's secret";
      EXPECT_EQ(res.status().code(), StatusCode::kUnauthenticated) << res.status();
      if (!secret.empty()) ++with_other_secret;
    }
  }
  EXPECT_EQ(out, std::vector<float>(64, -1.0f)) << "a refused pull returned values";
  EXPECT_EQ(Values(), before) << "the parameters changed";
  EXPECT_EQ(client_a_->step(), version);
  // Counted: every request with another job's secret (and, over gRPC, those with none; tcp and
  // shm clients without a secret learn from the greeting and send nothing).
  EXPECT_GE(RefusedCount() - refused_before, with_other_secret);
  // The job's own trainer goes on.
  std::vector<float> g(100, 0.5f);
  Gradients grads;
  grads.Dense("w", g);
  grads.samples = 1;
  EXPECT_TRUE(client_a_->PushPull(grads).Wait().ok());
}

INSTANTIATE_TEST_SUITE_P(AllTransports, AuthTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm, TransportKind::kGrpc),
                         [](const auto& info) { return TransportKindName(info.param); });

TEST_F(PsTest, ATrainerWithAnotherJobsSecretFileIsRefusedAtConnectAndOneWithItsOwnTrains) {
  MakeJob("file-a", 1);
  MakeJob("file-b", 1);
  StartPserver("file-a");
  ASSERT_TRUE(WaitForPservers("file-a", 1));
  auto dir = MakeTempDir("auth-secret-");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(security::WriteSecretFile(*dir + "/b.secret", SecretOf("file-b")).ok());
  ASSERT_TRUE(security::WriteSecretFile(*dir + "/a.secret", SecretOf("file-a")).ok());

  auto wrong = ClientFor("file-a");
  wrong.connection.secret_file = *dir + "/b.secret";
  auto refused = Client::Connect(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnauthenticated) << refused.status();
  EXPECT_NE(refused.status().message().find("is not job 'file-a's"), std::string::npos) << refused.status();

  auto right = ClientFor("file-a");
  right.connection.secret_file = *dir + "/a.secret";
  auto c = Client::Connect(right);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> w(10, 1.0f);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
  EXPECT_TRUE((*c)->Initialize().ok());
  (void)RemoveAll(*dir);
}

}  // namespace
}  // namespace tessera::testing
