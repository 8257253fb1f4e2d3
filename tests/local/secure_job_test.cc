// A secured job end to end, started by hand as an administrator would: etcd over TLS with
// authentication on; `tessera job create --secure --tls` as etcd's root (the job gets its own
// etcd user, allowed its own keys only); `tessera certs` for the master, the pserver and the
// trainers. Then a C trainer (examples/c/linreg.c, the C API) and a Python one
// (tests/python/linreg.py, the module) train one sync job together through TCP over mutual TLS,
// each given only TESSERA_* variables: the job's etcd credentials, etcd's CA, the job's
// certificates. Both learn the known weights; without the job's certificates a trainer is told
// what to give.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <sstream>

#include "coord/connection.h"
#include "harness/etcd_server.h"
#include "local/local_fixture.h"

namespace tessera::testing {
namespace {

// The numbers after "w =" on the line of `output` that starts with `prefix`.
std::vector<float> WeightsIn(const std::string& output, const std::string& prefix) {
  std::vector<float> w;
  auto at = output.find(prefix);
  if (at == std::string::npos) return w;
  auto eq = output.find("w =", at);
  if (eq == std::string::npos) return w;
  std::istringstream line(output.substr(eq + 3, output.find('\n', eq) - eq - 3));
  for (float v; line >> v;) w.push_back(v);
  return w;
}

TEST_F(LocalTest, PythonAndCTrainAJobOverEtcdWithAuthAndTls) {
  auto etcd = EtcdServer::Launch({.tls = true});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string e = (*etcd)->endpoint(), etcd_ca = (*etcd)->ca_file();
  {
    // etcd's root user, then authentication on.
    ConnectionOptions c;
    c.etcd_endpoints = {e};
    c.etcd_ca_file = etcd_ca;
    auto eo = EtcdOptionsFor(c);
    ASSERT_TRUE(eo.ok()) << eo.status();
    auto admin = etcd::EtcdClient::Create(*eo);
    ASSERT_TRUE(admin.ok()) << admin.status();
    ASSERT_TRUE((*admin)->UserAdd("root", "rootpw").ok());
    (void)(*admin)->RoleAdd("root");
    ASSERT_TRUE((*admin)->UserGrantRole("root", "root").ok());
    ASSERT_TRUE((*admin)->AuthEnable().ok());
  }
  const std::string cred = dir_ + "/sj.cred", certs = dir_ + "/certs";
  auto made = Tessera({"job",
                       "create",
                       "--etcd",
                       e,
                       "--etcd-ca",
                       etcd_ca,
                       "--etcd-user",
                       "root",
                       "--etcd-password",
                       "rootpw",
                       "--job",
                       "sj",
                       "--pservers",
                       "1",
                       "--mode",
                       "sync",
                       "--min-trainers",
                       "2",
                       "--optimizer",
                       "sgd:lr=0.2",
                       "--secure",
                       "--credentials-out",
                       cred,
                       "--tls"});
  ASSERT_EQ(made.code, 0) << made.out;
  auto signed_ = Tessera(
      {"certs", "--job", "sj", "--out", certs, "--node", "master", "--node", "ps0", "--node", "trainer"});
  ASSERT_EQ(signed_.code, 0) << signed_.out;
  WriteLinearData(dir_ + "/lin.csv");
  auto up = Tessera({"upload", "--store", store(), "--dataset", "lin", "--format", "text", "--input",
                     dir_ + "/lin.csv", "--chunk-size", "32768"});
  ASSERT_EQ(up.code, 0) << up.out;

  // What every process of the job is given: the job's etcd user (not root), etcd's CA, and the
  // job's certificates for `node`.
  auto env = [&](const std::string& node) {
    return std::map<std::string, std::string>{{"TESSERA_ETCD", e},
                                              {"TESSERA_JOB", "sj"},
                                              {"TESSERA_ETCD_CREDENTIALS", cred},
                                              {"TESSERA_ETCD_CA", etcd_ca},
                                              {"TESSERA_TLS_CA", certs + "/ca.pem"},
                                              {"TESSERA_TLS_CERT", certs + "/" + node + ".pem"},
                                              {"TESSERA_TLS_KEY", certs + "/" + node + ".key"}};
  };
  std::vector<std::unique_ptr<Subprocess>> procs;
  auto start = [&](const std::vector<std::string>& argv, std::map<std::string, std::string> vars,
                   const std::string& log) -> Subprocess& {
    SpawnOptions o;
    o.argv = argv;
    o.env = std::move(vars);
    o.log_path = dir_ + "/" + log + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    procs.push_back(std::move(*p));
    return *procs.back();
  };
  const std::string tessera = BuildPath("src/tessera");
  start({tessera, "master", "--store", store(), "--dataset", "lin", "--passes", "4", "--min-tasks", "8",
         "--http-port", "0", "--lease-ttl", "3"},
        env("master"), "master");
  start({tessera, "pserver", "--lease-ttl", "3"}, env("ps0"), "pserver");
  auto trainer_env = [&](const std::string& id) {
    auto v = env("trainer");
    v["TESSERA_TRAINER_ID"] = id;
    v["TESSERA_STORE"] = store();
    v["TESSERA_DATASET"] = "lin";
    v["TESSERA_BATCH_SIZE"] = "32";
    v["TESSERA_TRANSPORT"] = "tcp";  // not shared memory: the data plane is TLS
    v["TESSERA_LEASE_TTL"] = "3";
    return v;
  };
  // Without the job's certificates, a trainer is told what to give, and stops.
  auto bare = trainer_env("x");
  bare.erase("TESSERA_TLS_CA");
  bare.erase("TESSERA_TLS_CERT");
  bare.erase("TESSERA_TLS_KEY");
  Subprocess& refused = start({BuildPath("examples/linreg_c")}, bare, "refused");
  ASSERT_EQ(refused.Wait(std::chrono::seconds(60)), std::optional<int>(1)) << refused.Output();
  EXPECT_NE(refused.Output().find("--tls-ca"), std::string::npos) << refused.Output();

  Subprocess& c = start({BuildPath("examples/linreg_c")}, trainer_env("0"), "trainer-c");
  Subprocess& py = start(
      {"/usr/bin/python3", std::string(TESSERA_SOURCE_DIR) + "/tests/python/linreg.py"},
      [&] {
        auto v = trainer_env("1");
        v["PYTHONPATH"] = BuildPath("python");  // the module beside the build
        return v;
      }(),
      "trainer-py");
  auto c_code = c.Wait(std::chrono::seconds(300));
  auto py_code = py.Wait(std::chrono::seconds(300));
  const std::string logs = c.Output() + py.Output() + procs[0]->Output() + procs[1]->Output();
  ASSERT_EQ(c_code, std::optional<int>(0)) << logs;
  ASSERT_EQ(py_code, std::optional<int>(0)) << logs;
  // Sync mode: both hold the job's one model at the end (as printed, to 4 places), the known
  // weights.
  const auto wc = WeightsIn(c.Output(), "linreg_c: trainer 0"),
             wpy = WeightsIn(py.Output(), "linreg.py: trainer 1");
  ASSERT_EQ(wc.size(), 5u) << c.Output();
  EXPECT_EQ(wc, wpy) << py.Output();
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(wc[j], kLinearTruth[j], 0.05) << "w[" << j << "]";
  // They reached the pserver over TCP (TLS in a --tls job) and the master over TLS gRPC.
  EXPECT_NE(logs.find("over tcp"), std::string::npos) << logs;
}

// `tessera local --secure-etcd` (what the platform runs): its etcd answers nobody without the
// job's credentials, and the job trains as usual with them; `tessera local scale` finds them.
TEST_F(LocalTest, ASecuredLocalEtcdRefusesAClientWithoutTheJobsCredentials) {
  UploadFashionMnist();
  Subprocess& p = StartLocal({"--dataset", "fm", "--model", "mlp", "--passes", "200", "--secure-etcd"});
  auto open = JobEtcd(p.pid());
  ASSERT_TRUE(open);
  etcd::CallOptions quick;
  quick.retry_timeout = std::chrono::seconds(3);
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(run() + "/etcd-credentials"); },
                        std::chrono::seconds(60)));
  auto refused = open->Get("/tessera/local/secret", {}, quick);
  EXPECT_FALSE(refused.ok()) << "read the job's secret without credentials";
  auto user = ReadEtcdCredentials(run() + "/etcd-credentials");
  ASSERT_TRUE(user.ok()) << user.status();
  etcd::EtcdOptions o = open->options();
  o.username = user->user;
  o.password = user->password;
  auto with = etcd::EtcdClient::Create(o);
  ASSERT_TRUE(with.ok());
  EXPECT_TRUE(WaitUntil([&] { return (*with)->Get("/tessera/local/config", {}, quick).ok(); },
                        std::chrono::seconds(30)));
  auto scaled = Tessera({"local", "scale", "--run", run(), "--trainers", "2"});
  EXPECT_EQ(scaled.code, 0) << scaled.out;
  EXPECT_TRUE(WaitUntil([&] { return p.Output().find("scaled up: started trainer-1") != std::string::npos; },
                        std::chrono::seconds(60)))
      << p.Output();
  ASSERT_TRUE(p.Signal(SIGTERM).ok());
  ASSERT_TRUE(p.Wait(std::chrono::seconds(60)).has_value());
}

}  // namespace
}  // namespace tessera::testing
