// `tessera job create|show|delete` against a real etcd, and `job create --secure` against an
// etcd with authentication on.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/files.h"
#include "coord/connection.h"
#include "ps/ps_fixture.h"
#include "security/certs.h"

namespace tessera::testing {
namespace {

struct Out {
  int code;
  std::string text;
};

class CliJobTest : public PsTest {
 protected:
  Out Tessera(std::vector<std::string> args) {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera")};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_path = dir_ + "/cli" + std::to_string(runs_++) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    auto code = (*p)->Wait(std::chrono::seconds(60));
    return {code.value_or(-1), (*p)->Output()};
  }
  int runs_ = 0;
};

TEST_F(CliJobTest, CreateShowRefuseDuplicateAndDelete) {
  const std::string e = server_->endpoint();
  auto created = Tessera({"job", "create", "--etcd", e, "--job", "j", "--pservers", "3", "--mode", "ssp:2",
                          "--optimizer", "adam:lr=0.001", "--slots", "96", "--wire", "topk:0.01"});
  ASSERT_EQ(created.code, 0) << created.text;
  auto cfg = JobConfig::FromJson(client_->Get(keys::Config("j"))->kvs[0].value);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->pservers, 3);
  EXPECT_EQ(cfg->mode.ToString(), "ssp:2");
  EXPECT_EQ(cfg->optimizer.type, OptimizerConfig::Type::kAdam);
  EXPECT_FALSE(cfg->token.empty());
  auto map = SlotMap::FromJson(client_->Get(keys::SlotMap("j"))->kvs[0].value);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->slots(), 96);

  auto show = Tessera({"job", "show", "--etcd", e, "--job", "j"});
  EXPECT_EQ(show.code, 0);
  EXPECT_NE(show.text.find("ssp:2"), std::string::npos) << show.text;
  EXPECT_NE(show.text.find("pserver 2: 32 slots"), std::string::npos) << show.text;
  EXPECT_NE(show.text.find("wire          topk:0.01: pushes send the largest 1% of each block's gradients"),
            std::string::npos)
      << show.text;
  // `tessera status` says it too, and --json gives it whole.
  auto status = Tessera({"status", "--etcd", e, "--job", "j"});
  EXPECT_NE(status.text.find("3 pservers; wire topk:0.01: pushes send"), std::string::npos) << status.text;
  auto json = Tessera({"status", "--etcd", e, "--job", "j", "--json"});
  EXPECT_NE(json.text.find("\"wire\": \"topk:0.01\""), std::string::npos) << json.text;
  auto typo = Tessera({"job", "create", "--etcd", e, "--job", "k", "--wire", "topk"});
  EXPECT_EQ(typo.code, 1);
  EXPECT_NE(typo.text.find("wire format 'topk' is not f32, bf16, f16, topk:R"), std::string::npos)
      << typo.text;
  EXPECT_TRUE(client_->Get(keys::Config("k"))->kvs.empty()) << "nothing written for a refused job";

  auto dup = Tessera({"job", "create", "--etcd", e, "--job", "j", "--pservers", "1"});
  EXPECT_EQ(dup.code, 1);
  EXPECT_NE(dup.text.find("already exists"), std::string::npos) << dup.text;
  EXPECT_EQ(JobConfig::FromJson(client_->Get(keys::Config("j"))->kvs[0].value)->pservers, 3);  // untouched

  auto del = Tessera({"job", "delete", "--etcd", e, "--job", "j"});
  EXPECT_EQ(del.code, 0) << del.text;
  EXPECT_TRUE(client_->Get(keys::Config("j"))->kvs.empty());
  auto gone = Tessera({"job", "show", "--etcd", e, "--job", "j"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.text.find("does not exist"), std::string::npos);
}

TEST_F(CliJobTest, BadFlagsAreRefusedClearly) {
  const std::string e = server_->endpoint();
  auto mode = Tessera({"job", "create", "--etcd", e, "--job", "j", "--mode", "bsp"});
  EXPECT_EQ(mode.code, 1);
  EXPECT_NE(mode.text.find("unknown mode 'bsp'"), std::string::npos) << mode.text;
  auto opt = Tessera({"job", "create", "--etcd", e, "--job", "j", "--optimizer", "adam:lr=-1"});
  EXPECT_NE(opt.text.find("lr must be a positive number"), std::string::npos) << opt.text;
  auto slots = Tessera({"job", "create", "--etcd", e, "--job", "j", "--pservers", "8", "--slots", "4"});
  EXPECT_NE(slots.text.find("slots must be at least"), std::string::npos) << slots.text;
  EXPECT_TRUE(client_->Get(keys::Config("j"))->kvs.empty());
  auto help = Tessera({"job", "create", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.text.find("--min-trainers"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// `job create --secure` on an etcd with authentication: each job gets a user allowed its own keys
// only. Job B's user can neither read nor write job A's keys (its secret included); job A's
// processes run with A's user; the command refuses an etcd without authentication and a caller
// without the root user.
class SecureJobTest : public CliJobTest {
 protected:
  std::unique_ptr<etcd::EtcdClient> ClientAs(const std::string& credentials_file) {
    ConnectionOptions c;
    c.etcd_endpoints = {server_->endpoint()};
    c.etcd_credentials_file = credentials_file;
    auto eo = EtcdOptionsFor(c);
    EXPECT_TRUE(eo.ok()) << eo.status();
    eo->retry_timeout = std::chrono::seconds(5);
    auto client = etcd::EtcdClient::Create(*eo);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(*client);
  }
};

TEST_F(SecureJobTest, EachJobsEtcdUserReachesItsOwnKeysOnly) {
  const std::string e = server_->endpoint();
  const std::vector<std::string> root = {"--etcd-user", "root", "--etcd-password", "rootpw"};
  auto create = [&](const std::string& job, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"job",
                                     "create",
                                     "--etcd",
                                     e,
                                     "--job",
                                     job,
                                     "--secure",
                                     "--credentials-out",
                                     dir_ + "/" + job + ".cred"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tessera(args);
  };
  // Authentication off: --secure would protect nothing, and says so.
  auto open = create("sa", root);
  EXPECT_EQ(open.code, 1) << open.text;
  EXPECT_NE(open.text.find("authentication is off"), std::string::npos) << open.text;

  ASSERT_TRUE(client_->UserAdd("root", "rootpw").ok());
  (void)client_->RoleAdd("root");
  ASSERT_TRUE(client_->UserGrantRole("root", "root").ok());
  ASSERT_TRUE(client_->AuthEnable().ok());
  ConnectionOptions rc;
  rc.etcd_endpoints = {e};
  rc.etcd_username = "root";
  rc.etcd_password = "rootpw";
  client_ = etcd::EtcdClient::Create(*EtcdOptionsFor(rc)).value();

  auto no_root = create("sa", {});
  EXPECT_EQ(no_root.code, 1) << no_root.text;
  EXPECT_NE(no_root.text.find("run it as etcd's root user"), std::string::npos) << no_root.text;

  for (const std::string job : {"sa", "sb"}) {
    auto made = create(job, root);
    ASSERT_EQ(made.code, 0) << made.text;
    EXPECT_NE(made.text.find("its own etcd user tessera-job-" + job), std::string::npos) << made.text;
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + "/" + job + ".cred").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  auto a = ClientAs(dir_ + "/sa.cred");
  auto b = ClientAs(dir_ + "/sb.cred");
  ASSERT_TRUE(b->Get(keys::Config("sb")).ok()) << "a job's user reads its own keys";
  for (const std::string& key : {keys::Config("sa"), keys::Secret("sa"), keys::SlotMap("sa")}) {
    auto got = b->Get(key);
    EXPECT_EQ(got.status().code(), StatusCode::kPermissionDenied) << key << ": " << got.status();
  }
  auto put = b->Put(keys::Config("sa"), "{}");
  EXPECT_EQ(put.status().code(), StatusCode::kPermissionDenied) << put.status();
  auto del = b->Delete(keys::Job("sa"), /*prefix=*/true);
  EXPECT_EQ(del.status().code(), StatusCode::kPermissionDenied) << del.status();
  etcd::GetOptions all;
  all.prefix = true;
  EXPECT_EQ(b->Get(keys::Root(), all).status().code(), StatusCode::kPermissionDenied) << "nor list every job";
  auto cfg = a->Get(keys::Config("sa"));
  ASSERT_TRUE(cfg.ok() && !cfg->kvs.empty()) << "job A's keys are intact";
  EXPECT_NE(cfg->kvs[0].value, "{}");

  // Job A runs with its own user: a pserver and a trainer.
  StartPserver("sa", 2, "auto", {"--etcd-credentials", dir_ + "/sa.cred"});
  ASSERT_TRUE(WaitForPservers("sa", 1));
  ClientOptions co = ClientFor("sa");
  co.connection.etcd_credentials_file = dir_ + "/sa.cred";
  auto trainer = Client::Connect(co);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  std::vector<float> w(10, 1.0f), g(10, 1.0f);
  ASSERT_TRUE((*trainer)->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE((*trainer)->Initialize().ok());
  Gradients grads;
  grads.Dense("w", g);
  grads.samples = 1;
  ASSERT_TRUE((*trainer)->PushPull(grads).Wait().ok());
  EXPECT_NE(w[0], 1.0f) << "the step was applied";
  // A trainer of job A with job B's user cannot even read A's configuration.
  ClientOptions wrong = ClientFor("sa");
  wrong.connection.etcd_credentials_file = dir_ + "/sb.cred";
  auto refused = Client::Connect(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status();

  // Deleting job B as root removes its user too.
  auto gone = Tessera(
      {"job", "delete", "--etcd", e, "--job", "sb", "--etcd-user", "root", "--etcd-password", "rootpw"});
  ASSERT_EQ(gone.code, 0) << gone.text;
  EXPECT_FALSE(ClientAs(dir_ + "/sb.cred")->Get(keys::Config("sb")).ok()) << "job B's user is gone";
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// `tessera certs`: the job's CA once, node certificates signed by it and naming the job, keys
// mode 0600, nothing overwritten, a given CA used as given, bad names refused.
TEST_F(CliJobTest, CertsMakesAJobCaAndNodeCertificatesWithoutOverwriting) {
  const std::string out = dir_ + "/certs";
  auto made = Tessera({"certs", "--job", "cj", "--out", out, "--node", "pserver-0=10.1.2.3,ps0.example",
                       "--node", "trainer"});
  ASSERT_EQ(made.code, 0) << made.text;
  auto read = [](const std::string& path) { return ReadFile(path).value_or(""); };
  for (const char* key : {"ca.key", "pserver-0.key", "trainer.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((out + "/" + key).c_str(), &st), 0) << key;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  const std::string ca = read(out + "/ca.pem");
  auto names = security::CertNames(read(out + "/pserver-0.pem"));
  ASSERT_TRUE(names.ok()) << names.status();
  const std::vector<std::string> want = {"DNS:tessera.cj", "DNS:pserver-0", "IP:10.1.2.3", "DNS:ps0.example"};
  EXPECT_EQ(*names, want);
  EXPECT_TRUE(*security::SignedBy(read(out + "/pserver-0.pem"), ca));
  EXPECT_TRUE(*security::SignedBy(read(out + "/trainer.pem"), ca));

  // Again: the CA is reused, an existing node is not overwritten, a new one is signed by the same CA.
  auto again = Tessera({"certs", "--job", "cj", "--out", out, "--node", "trainer"});
  EXPECT_EQ(again.code, 1) << again.text;
  EXPECT_NE(again.text.find("trainer.key exists"), std::string::npos) << again.text;
  ASSERT_EQ(Tessera({"certs", "--job", "cj", "--out", out, "--node", "master"}).code, 0);
  EXPECT_EQ(read(out + "/ca.pem"), ca);
  EXPECT_TRUE(*security::SignedBy(read(out + "/master.pem"), ca));

  // A CA given as PEM files signs the nodes of another directory.
  const std::string other = dir_ + "/other";
  ASSERT_EQ(Tessera({"certs", "--job", "cj", "--out", other, "--ca-cert", out + "/ca.pem", "--ca-key",
                     out + "/ca.key", "--node", "ps1"})
                .code,
            0);
  EXPECT_TRUE(*security::SignedBy(read(other + "/ps1.pem"), ca));

  auto bad = Tessera({"certs", "--job", "cj", "--out", out, "--node", "w=1.2.3.4,no_way!"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.text.find("neither an IP address nor a host name"), std::string::npos) << bad.text;
  EXPECT_FALSE(std::filesystem::exists(out + "/w.key")) << "nothing is written for a refused node";
}

}  // namespace
}  // namespace tessera::testing
