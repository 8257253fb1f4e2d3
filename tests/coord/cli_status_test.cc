// `tessera status`: lists a job's members, and fails with one line naming the endpoint when etcd
// is down.
#include <gtest/gtest.h>

#include "common/files.h"
#include "coord/etcd_fixture.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "common/net.h"
#include "harness/subprocess.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

struct CliRun {
  int code = -1;
  std::string out;
};

CliRun RunTessera(const std::vector<std::string>& args) {
  auto dir = MakeTempDir("cli-test-");
  EXPECT_TRUE(dir.ok());
  SpawnOptions o;
  o.argv = {BuildPath("src/tessera")};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_path = *dir + "/out";
  auto p = Subprocess::Spawn(o);
  EXPECT_TRUE(p.ok());
  CliRun r;
  auto code = (*p)->Wait(std::chrono::seconds(60));
  EXPECT_TRUE(code.has_value());
  r.code = code.value_or(-1);
  r.out = (*p)->Output();
  (void)RemoveAll(*dir);
  return r;
}

TEST_F(EtcdTest, StatusListsRegisteredMembers) {
  auto lease = client_->GrantLease(10);
  ASSERT_TRUE(lease.ok());
  Registry ps(client_.get(), keys::PserverPrefix("demo"));
  ASSERT_TRUE(ps.ClaimIndex(2, "{\"address\":\"127.0.0.1:7000\"}", lease->id).ok());
  Registry tr(client_.get(), keys::TrainerPrefix("demo"));
  ASSERT_TRUE(tr.Register("trainer-0", "{}", lease->id).ok());

  CliRun r = RunTessera({"status", "--etcd", server_->endpoint(), "--job", "demo"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("pservers (1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1:7000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trainer-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("master: none elected"), std::string::npos) << r.out;

  CliRun empty = RunTessera({"status", "--etcd", server_->endpoint(), "--job", "other"});
  EXPECT_EQ(empty.code, 0);
  EXPECT_NE(empty.out.find("pservers: none registered"), std::string::npos) << empty.out;

  CliRun json = RunTessera({"status", "--etcd", server_->endpoint(), "--job", "demo", "--json"});
  EXPECT_EQ(json.code, 0);
  EXPECT_NE(json.out.find("\"pservers\""), std::string::npos) << json.out;
}

TEST_F(EtcdTest, StatusAgainstStoppedEtcdFailsWithOneLineNamingTheEndpoint) {
  ASSERT_TRUE(server_->Stop().ok());
  CliRun r = RunTessera({"status", "--etcd", server_->endpoint(), "--job", "demo"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(server_->endpoint()), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.out.rfind("tessera status: ", 0), 0u) << r.out;
}

// One-shot commands against an etcd that is not there fail at once (not after --etcd-timeout),
// naming the address and the reason; a host that does not resolve is not a refused connection.
TEST(CliTest, OneShotCommandsFailWithinSecondsNamingTheAddressAndTheReason) {
  struct Case {
    std::vector<std::string> command;
    std::string etcd;
    std::string says;
  };
  const std::string port = std::to_string(FreeLoopbackPort());  // nothing listens there
  const std::vector<Case> cases = {
      {{"status"}, "127.0.0.1:" + port, "connection refused"},
      {{"job", "create"}, "127.0.0.1:" + port, "connection refused"},
      {{"job", "show"}, "127.0.0.1:" + port, "connection refused"},
      {{"export", "--out", "/tmp/never-written.tsm"}, "127.0.0.1:" + port, "connection refused"},
      {{"status"}, "no-such-etcd-host.invalid:2379", "cannot resolve host 'no-such-etcd-host.invalid'"},
      {{"job", "create"}, "no-such-etcd-host.invalid:2379", "cannot resolve host"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.command;
    args.insert(args.end(), {"--etcd", c.etcd, "--job", "j"});
    auto t0 = std::chrono::steady_clock::now();
    CliRun r = RunTessera(args);
    double took = SecondsSince(t0);
    std::printf("%s against %s: refused in %.2f s\n", c.command[0].c_str(), c.etcd.c_str(), took);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("cannot reach etcd at " + c.etcd), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << r.out;
    // Printed above (about 0.05 s idle); the bound leaves room for a loaded machine.
    EXPECT_LT(took, 15.0) << r.out;
  }
}

TEST(CliTest, BadFlagsAreRejectedClearly) {
  CliRun bad_job = RunTessera({"status", "--etcd", "127.0.0.1:2379", "--job", "a/b"});
  EXPECT_NE(bad_job.code, 0);
  EXPECT_NE(bad_job.out.find("job name"), std::string::npos) << bad_job.out;
  CliRun bad_ep = RunTessera({"status", "--etcd", "nohost", "--job", "j"});
  EXPECT_NE(bad_ep.code, 0);
  EXPECT_NE(bad_ep.out.find("host:port"), std::string::npos) << bad_ep.out;
  CliRun help = RunTessera({"status", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("TESSERA_ETCD"), std::string::npos) << help.out;
  CliRun version = RunTessera({"version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_NE(version.out.find("tessera 0."), std::string::npos);
  CliRun version_flag = RunTessera({"--version"});
  EXPECT_EQ(version_flag.code, 0);
  EXPECT_NE(version_flag.out.find("tessera 0."), std::string::npos) << version_flag.out;
}

TEST(CliTest, EveryMistakeInTheCommandLineExitsTwo) {
  // A missing required flag and a value of the wrong type were CLI11's 106 and 105.
  CliRun missing = RunTessera({"upload", "--store", "s"});
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("--dataset is required"), std::string::npos) << missing.out;
  CliRun not_a_number = RunTessera({"local", "--passes", "abc"});
  EXPECT_EQ(not_a_number.code, 2) << not_a_number.out;
  EXPECT_NE(not_a_number.out.find("--passes"), std::string::npos) << not_a_number.out;
  CliRun unknown_flag = RunTessera({"status", "--jbo", "j"});
  EXPECT_EQ(unknown_flag.code, 2) << unknown_flag.out;
}

TEST(CliTest, AMisspeltCommandIsNamedWithItsLikelyMeaning) {
  CliRun typo = RunTessera({"locall", "--run", "r"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("unknown command 'locall' (did you mean 'local'?)"), std::string::npos) << typo.out;
  CliRun unknown = RunTessera({"frobnicate"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.out.find("unknown command 'frobnicate'\nCommands: version, status"), std::string::npos)
      << unknown.out;
}

}  // namespace
}  // namespace tessera::testing
