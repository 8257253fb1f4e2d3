// Mutual TLS on the data plane (gRPC and TCP) of a job created with --tls: a trainer with the
// job's CA and a certificate of its own trains; a peer whose certificate another CA signed is
// refused by the pserver (and a pserver so certified by the trainer); a plaintext peer is
// refused; a trainer without the files is told which to give. Certificates from `tessera certs`.
#include <gtest/gtest.h>

#include "common/files.h"
#include "job/job_store.h"
#include "ps/ps_fixture.h"
#include "security/tls_config.h"

namespace tessera::testing {
namespace {

class TlsTest : public PsTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    PsTest::SetUp();
    certs_ = dir_ + "/certs";
    other_ = dir_ + "/other";
    for (const auto& [out, node] : {std::pair{certs_, "ps"}, {certs_, "trainer"}, {other_, "fake"}}) {
      SpawnOptions o;
      o.argv = {BuildPath("src/tessera"), "certs", "--job", kJob, "--out", out, "--node", node};
      o.log_path = dir_ + "/certs-" + std::string(node) + ".log";
      auto p = Subprocess::Spawn(o);
      ASSERT_TRUE(p.ok());
      auto code = (*p)->Wait(std::chrono::seconds(30));
      ASSERT_TRUE(code.has_value() && *code == 0) << (*p)->Output();
    }
    JobConfig c;
    c.pservers = 1;
    c.slots = 64;
    c.block_size = 64;
    c.optimizer = *OptimizerConfig::Parse("sgd:lr=0.1");
    c.token = NewUuid();
    c.tls = true;
    ASSERT_TRUE(client_->Commit(CreateJobTxn(kJob, &c, security::JobSecret::Generate())).ok());
    StartPserver(
        kJob, 2, "auto",
        {"--tls-ca", certs_ + "/ca.pem", "--tls-cert", certs_ + "/ps.pem", "--tls-key", certs_ + "/ps.key"});
    ASSERT_TRUE(WaitForPservers(kJob, 1));
  }

  ClientOptions Trainer(const std::string& dir, const std::string& node, const std::string& ca_dir) {
    ClientOptions o = ClientFor(kJob);
    o.transport = GetParam();
    o.request_timeout = std::chrono::seconds(10);
    o.connection.tls_ca_file = ca_dir + "/ca.pem";
    o.connection.tls_cert_file = dir + "/" + node + ".pem";
    o.connection.tls_key_file = dir + "/" + node + ".key";
    return o;
  }

  const std::string kJob = "tj";
  std::string certs_, other_;
};

TEST_P(TlsTest, OnlyPeersCertifiedByTheJobsCaTalkToItsPserver) {
  // The pserver serves every transport: gRPC and TCP over TLS, shared memory to its own user.
  auto kv = client_->Get(keys::Pserver(kJob, 0));
  ASSERT_TRUE(kv.ok() && !kv->kvs.empty());
  auto endpoints = ParsePserverEndpoints(kv->kvs[0].value);
  ASSERT_TRUE(endpoints.ok());
  auto kind = ParseTransportKind(GetParam());
  ASSERT_TRUE(kind.ok());
  ASSERT_EQ(endpoints->endpoints.count(*kind), 1u);
  const std::string endpoint = endpoints->endpoints.at(*kind);

  auto good = Client::Connect(Trainer(certs_, "trainer", certs_));
  ASSERT_TRUE(good.ok()) << good.status();
  std::vector<float> w(100, 1.0f), g(100, 1.0f);
  ASSERT_TRUE((*good)->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE((*good)->Initialize().ok());
  Gradients grads;
  grads.Dense("w", g);
  grads.samples = 1;
  ASSERT_TRUE((*good)->PushPull(grads).Wait().ok());
  const std::vector<float> after_step = w;
  EXPECT_NE(after_step[0], 1.0f);

  wire::DataRequest status;
  status.set_op(wire::DataRequest::STATUS);
  auto call = [&](const TransportOptions& to) {
    auto conn = NewClientConnection(*kind, endpoint, to);
    return conn->Call(status.SerializeAsString(), {}, {}, std::chrono::seconds(5)).status();
  };
  TransportOptions base;
  base.secret = SecretOf(kJob);  // the job's secret: only TLS stands in the way
  auto ca = ReadFile(certs_ + "/ca.pem").value();
  auto load = [&](const std::string& ca_pem, const std::string& cert, const std::string& key) {
    auto t = std::make_shared<security::TlsConfig>();
    t->job = kJob;
    t->ca_pem = ca_pem;
    t->cert_pem = ReadFile(cert).value();
    t->key_pem = ReadFile(key).value();
    return std::shared_ptr<const security::TlsConfig>(t);
  };
  TransportOptions genuine = base;
  genuine.tls = load(ca, certs_ + "/trainer.pem", certs_ + "/trainer.key");
  EXPECT_TRUE(call(genuine).ok()) << "the job's own certificate";
  // A certificate of another CA (for the same job name): the pserver refuses the handshake.
  TransportOptions foreign = base;
  foreign.tls = load(ca, other_ + "/fake.pem", other_ + "/fake.key");
  Status f = call(foreign);
  EXPECT_FALSE(f.ok()) << "a client certified by another CA was served";
  // A client that trusts only the other CA refuses the pserver's certificate.
  TransportOptions distrust = base;
  distrust.tls = load(ReadFile(other_ + "/ca.pem").value(), other_ + "/fake.pem", other_ + "/fake.key");
  EXPECT_FALSE(call(distrust).ok()) << "a pserver certified by an unknown CA was trusted";
  // Plaintext to the TLS pserver (it waits for a TLS handshake that never comes).
  EXPECT_FALSE(call(base).ok()) << "a plaintext client was served";
  EXPECT_TRUE((*good)->Pull().Wait().ok());
  EXPECT_EQ(w, after_step) << "the refused peers changed nothing";

  // TlsConfig::Load refuses a certificate another CA signed, naming the files.
  auto mixed = Client::Connect(Trainer(other_, "fake", certs_));
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("is not signed by the CA"), std::string::npos) << mixed.status();
  // Without the files: told which to give.
  ClientOptions none = ClientFor(kJob);
  auto refused = Client::Connect(none);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("speaks TLS"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("--tls-ca"), std::string::npos) << refused.status();
}

INSTANTIATE_TEST_SUITE_P(DataPlanes, TlsTest, ::testing::Values("grpc", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tessera::testing
