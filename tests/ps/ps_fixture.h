// Fixture for pserver tests: a real etcd, a job written to it, and pserver processes
// (`tessera pserver`) started and ended by PID. With tls_ set before MakeJob, jobs are made
// with --tls and certificates (a CA per job, as `tessera certs` makes them), and the pservers,
// clients and raw connections of the fixture use them. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/random.h"
#include "coord/etcd_fixture.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "harness/job_certs.h"
#include "harness/metrics_scrape.h"
#include "harness/subprocess.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "tessera/client.h"
#include "tessera/data.pb.h"
#include "transport/endpoint_choice.h"
#include "transport/transport_factory.h"

namespace tessera::testing {

class PsTest : public EtcdTest {
 protected:
  void SetUp() override {
    EtcdTest::SetUp();
    auto d = MakeTempDir("ps-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override {
    procs_.clear();
    if (!std::getenv("TESSERA_KEEP_TEST_DIR")) (void)RemoveAll(dir_);
  }

  JobConfig MakeJob(const std::string& job, int pservers, const std::string& mode = "sync",
                    const std::string& optimizer = "sgd:lr=0.1", int64_t block_size = 64,
                    int min_trainers = 1, NonFinitePolicy nonfinite = NonFinitePolicy::kSkip) {
    JobConfig c;
    c.nonfinite = nonfinite;
    c.pservers = pservers;
    c.slots = 64;
    c.block_size = block_size;
    c.mode = *ConsistencyMode::Parse(mode);
    c.optimizer = *OptimizerConfig::Parse(optimizer);
    c.min_trainers = min_trainers;
    c.token = NewUuid();
    c.tls = tls_;
    c.replicas = replicas_;
    c.backup_trainers = backup_trainers_;
    c.initial_pservers = initial_pservers_;
    c.wire = wire_;
    if (tls_) MakeCerts(job);
    // With a secret, as every job made by `tessera job create` or `tessera local`.
    auto r = client_->Commit(CreateJobTxn(job, &c, security::JobSecret::Generate()));
    EXPECT_TRUE(r.ok() && r->succeeded) << r.status();
    return c;
  }

  // Starts a `tessera pserver` process; returns its index in procs_.
  size_t StartPserver(const std::string& job, int64_t ttl = 2, const std::string& transport = "auto",
                      const std::vector<std::string>& extra = {}) {
    SpawnOptions o;
    o.argv = {
        BuildPath("src/tessera"), "pserver",     "--etcd", server_->endpoint(), "--job", job, "--lease-ttl",
        std::to_string(ttl),      "--transport", transport};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = TlsEnv(job);
    o.log_path = dir_ + "/pserver" + std::to_string(procs_.size()) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    procs_.push_back(std::move(*p));
    return procs_.size() - 1;
  }

  // Waits until `n` pservers of `job` are registered.
  bool WaitForPservers(const std::string& job, size_t n,
                       std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    Registry reg(client_.get(), keys::PserverPrefix(job));
    return WaitUntil(
        [&] {
          auto l = reg.List();
          return l.ok() && l->members.size() == n;
        },
        timeout);
  }

  // The value of `metric` on pserver `index` of `job`'s /metrics (the address it registered);
  // -1 if it cannot be read.
  double PserverMetric(const std::string& job, int index, const std::string& metric) {
    auto kv = client_->Get(keys::Pserver(job, index));
    if (!kv.ok() || kv->kvs.empty()) return -1;
    return ScrapeMetric(nlohmann::json::parse(kv->kvs[0].value).value("metrics", ""), metric);
  }

  // A raw data-plane connection to pserver `index` of `job` over `kind`, as a trainer would
  // choose it from the registration.
  // The job's secret, as its processes read it.
  security::JobSecret SecretOf(const std::string& job) {
    auto cfg = LoadJobConfig(client_.get(), job);
    EXPECT_TRUE(cfg.ok()) << cfg.status();
    if (!cfg.ok()) return {};
    auto s = LoadJobSecret(client_.get(), job, *cfg);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.value_or(security::JobSecret());
  }

  // `secret`: the job's unless given (another job's, or an empty one, for refusal tests).
  std::unique_ptr<ClientConnection> RawConnection(const std::string& job, int index,
                                                  TransportKind kind = TransportKind::kAuto,
                                                  std::optional<security::JobSecret> secret = std::nullopt) {
    auto kv = client_->Get(keys::Pserver(job, index));
    EXPECT_TRUE(kv.ok() && !kv->kvs.empty()) << "pserver " << index << " of " << job << " is not registered";
    if (!kv.ok() || kv->kvs.empty()) return nullptr;
    auto endpoints = ParsePserverEndpoints(kv->kvs[0].value);
    EXPECT_TRUE(endpoints.ok()) << endpoints.status();
    auto choice = ChooseEndpoint(*endpoints, kind, HostIdentity());
    EXPECT_TRUE(choice.ok()) << choice.status();
    if (!choice.ok()) return nullptr;
    TransportOptions to;
    to.secret = secret ? *secret : SecretOf(job);
    if (tls_) {
      auto t = security::TlsConfig::Load(job, TlsFile(job, "ca.pem"), TlsFile(job, "node.pem"),
                                         TlsFile(job, "node.key"));
      EXPECT_TRUE(t.ok()) << t.status();
      to.tls = t.value_or(nullptr);
    }
    return NewClientConnection(choice->kind, choice->endpoint, to);
  }

  // Pserver `index`'s STATUS reply (version, counters), asked over a raw connection.
  wire::DataReply PserverStatus(const std::string& job, const std::string& token, int index) {
    wire::DataReply reply;
    auto conn = RawConnection(job, index);
    if (!conn) return reply;
    wire::DataRequest r;
    r.set_op(wire::DataRequest::STATUS);
    r.set_job_token(token);
    r.set_pserver_index(index);
    auto res = conn->Call(r.SerializeAsString(), {}, {}, std::chrono::seconds(10));
    EXPECT_TRUE(res.ok()) << res.status();
    if (res.ok()) reply.ParseFromArray(res->header.data(), static_cast<int>(res->header.size()));
    return reply;
  }

  // The command of a tests/linear_trainer process (tests/tools/linear_trainer.cc) for `job`.
  std::vector<std::string> LinearTrainer(const std::string& job, int id, int dim, int batch, int steps,
                                         size_t trainers) {
    return {BuildPath("tests/linear_trainer"),
            "--etcd",
            server_->endpoint(),
            "--job",
            job,
            "--id",
            std::to_string(id),
            "--dim",
            std::to_string(dim),
            "--batch",
            std::to_string(batch),
            "--steps",
            std::to_string(steps),
            "--trainers",
            std::to_string(trainers)};
  }

  // Runs `n` linear trainers of `job` to their end (each writes its w to `out_prefix` + its id;
  // `extra`: more arguments), expecting each to succeed.
  void RunLinearTrainers(const std::string& job, int n, int dim, int batch, int steps,
                         const std::string& out_prefix, const std::vector<std::string>& extra = {}) {
    std::vector<std::unique_ptr<Subprocess>> trainers;
    for (int t = 0; t < n; ++t) {
      SpawnOptions o;
      o.argv = LinearTrainer(job, t, dim, batch, steps, n);
      o.argv.push_back("--out");
      o.argv.push_back(out_prefix + std::to_string(t));
      o.argv.insert(o.argv.end(), extra.begin(), extra.end());
      o.log_path = out_prefix + std::to_string(t) + ".log";
      auto p = Subprocess::Spawn(o);
      ASSERT_TRUE(p.ok()) << p.status();
      trainers.push_back(std::move(*p));
    }
    for (auto& t : trainers) {
      auto code = t->Wait(std::chrono::seconds(90));
      ASSERT_TRUE(code.has_value()) << t->Output();
      std::string pservers;  // the job's: the last ones started
      for (size_t i = procs_.size() >= 2 ? procs_.size() - 2 : 0; i < procs_.size(); ++i)
        pservers += "\npserver process " + std::to_string(i) + ":\n" + procs_[i]->Output();
      ASSERT_EQ(*code, 0) << t->Output() << pservers;
    }
  }

  ClientOptions ClientFor(const std::string& job, const std::string& id = "") {
    ClientOptions o;
    o.connection.etcd_endpoints = {server_->endpoint()};
    o.connection.job = job;
    o.trainer_id = id;
    o.lease_ttl_seconds = 2;
    o.request_timeout = std::chrono::seconds(60);
    if (tls_) {
      o.connection.tls_ca_file = TlsFile(job, "ca.pem");
      o.connection.tls_cert_file = TlsFile(job, "node.pem");
      o.connection.tls_key_file = TlsFile(job, "node.key");
    }
    return o;
  }

  // A TLS job's files for this fixture's processes (one certificate serves them all).
  std::string TlsFile(const std::string& job, const std::string& name) const {
    return dir_ + "/tls-" + job + "/" + name;
  }
  // TESSERA_TLS_* for a process of `job` (empty without TLS).
  std::map<std::string, std::string> TlsEnv(const std::string& job) const {
    if (!tls_) return {};
    return {{"TESSERA_TLS_CA", TlsFile(job, "ca.pem")},
            {"TESSERA_TLS_CERT", TlsFile(job, "node.pem")},
            {"TESSERA_TLS_KEY", TlsFile(job, "node.key")}};
  }
  void MakeCerts(const std::string& job) {
    ASSERT_EQ(::mkdir((dir_ + "/tls-" + job).c_str(), 0700), 0);
    Status s = WriteJobCerts(dir_ + "/tls-" + job, job);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::string dir_;
  bool tls_ = false;          // jobs made from here on use TLS
  int replicas_ = 1;          // jobs made from here on keep this many copies of each shard
  int backup_trainers_ = 0;   // and close a sync step without this many trainers' pushes
  int initial_pservers_ = 0;  // and start elastic with this many pserver processes (0: not elastic)
  WireChoice wire_;           // and send gradients and values in this wire format
  std::vector<std::unique_ptr<Subprocess>> procs_;
};

}  // namespace tessera::testing
