// `tessera launch --hosts FILE`: a whole job over ssh, against real sshd daemons, one in each of
// three network namespaces ("hosts") with keys this test makes; the launcher runs on a fourth
// host, as on a user's machine. etcd and the masters on one host, a pserver and a trainer on each
// of the two others: the job must train to completion over TCP between hosts, the nodes must
// advertise their host's address, the launcher must gather every node's log, and nothing may be
// left running on any host, even when the launcher is SIGKILLed mid-job (each node sees its ssh
// stdin close). Needs root (namespaces, sshd) and openssh-server; skipped with a message otherwise.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "data/data_fixture.h"
#include "harness/netns.h"
#include "harness/processes.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

class SshLaunchTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/ssh-keygen"))
      GTEST_SKIP() << "openssh-server is not installed";
    std::string why;
    if (!lab_.Open(&why)) GTEST_SKIP() << "network namespaces cannot be created here (needs root): " << why;
    job_ = "ssh" + std::to_string(::getpid());
    ASSERT_TRUE(lab_.AddHost("head", 1));
    for (int i = 1; i <= 3; ++i) ASSERT_TRUE(lab_.AddHost("h" + std::to_string(i), 10 + i));
    // Keys: the hosts' and the user's, and sshd's privilege-separation directory.
    std::string out;
    ASSERT_EQ(NetLab::Sh("mkdir -p /run/sshd && ssh-keygen -q -t ed25519 -N '' -f " + dir_ + "/host_key && " +
                             "ssh-keygen -q -t ed25519 -N '' -f " + dir_ + "/user_key && cp " + dir_ +
                             "/user_key.pub " + dir_ + "/authorized_keys",
                         &out),
              0)
        << out;
    for (int i = 1; i <= 3; ++i) {
      const std::string h = "h" + std::to_string(i), conf = dir_ + "/sshd-" + h + ".conf";
      std::ofstream(conf) << "ListenAddress " << lab_.Ip(h) << "\nPort 22\nHostKey " << dir_ << "/host_key\n"
                          << "AuthorizedKeysFile " << dir_ << "/authorized_keys\nPermitRootLogin prohibit-password\n"
                          << "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                          << "PidFile " << dir_ << "/sshd-" << h << ".pid\nLogLevel ERROR\n";
      lab_.Start(h, {"/usr/sbin/sshd", "-D", "-e", "-f", conf}, dir_ + "/sshd-" + h + ".log");
    }
    for (int i = 1; i <= 3; ++i) {
      const std::string ip = lab_.Ip("h" + std::to_string(i));
      ASSERT_TRUE(WaitUntil([&] { return NetLab::Sh("ip netns exec " + lab_.Ns("head") + " " + Ssh(ip) + " true") == 0; },
                            std::chrono::seconds(30), std::chrono::milliseconds(200)))
          << "sshd on " << ip << " did not answer: " << ReadFile(dir_ + "/sshd-h" + std::to_string(i) + ".log").value_or("");
    }
    std::ofstream(dir_ + "/hosts.txt") << "# the test's cluster\n"
                                       << lab_.Ip("h1") << " etcd master\n"
                                       << "root@" << lab_.Ip("h2") << ":22 pserver trainer\n"
                                       << lab_.Ip("h3") << " pserver trainer\n";
  }

  void TearDown() override {
    // The hosts' processes go with the lab; the check for leftovers is in each test.
    TempDirTest::TearDown();
  }

  std::string Ssh(const std::string& ip) const {
    return "ssh -i " + dir_ + "/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
           "-o BatchMode=yes -o ConnectTimeout=5 root@" + ip;
  }

  std::vector<std::string> LaunchArgv(const std::string& spec, const std::string& run) const {
    return {BuildPath("src/tessera"), "launch", "--spec", spec, "--hosts", dir_ + "/hosts.txt", "--run", run,
            "--ssh-identity", dir_ + "/user_key", "--ssh-option", "StrictHostKeyChecking=no", "--ssh-option",
            "UserKnownHostsFile=/dev/null", "--ssh-option", "LogLevel=ERROR", "--remote-dir", dir_ + "/remote"};
  }

  std::string WriteSpec(int passes) {
    const std::string path = dir_ + "/job.yaml";
    std::ofstream(path) << "name: " << job_ << "\nmasters: 2\npservers: 2\ntrainers: 2\n"
                        << "train: {mode: sync, optimizer: 'adam:lr=0.001', passes: " << passes
                        << ", dataset: fm, eval_dataset: fm-test, model: mlp, model_args: [hidden=64],"
                        << " lease_ttl: 3, checkpoint_every: 2}\n"
                        << "store: {path: " << dir_ << "/store}\ncheckpoints: {path: " << dir_ << "/ckpt}\n";
    return path;
  }

  NetLab lab_;
  std::string job_;
};

TEST_F(SshLaunchTest, TrainsAcrossHostsAndLeavesNothingRunning) {
  ASSERT_TRUE(UploadFashionMnist(dir_ + "/store"));
  const std::string run = dir_ + "/run";
  Subprocess& launcher = lab_.Start("head", LaunchArgv(WriteSpec(2), run), dir_ + "/launch.log");
  auto code = launcher.Wait(std::chrono::seconds(240));
  ASSERT_TRUE(code.has_value()) << launcher.Output();
  ASSERT_EQ(*code, 0) << launcher.Output();
  EXPECT_NE(launcher.Output().find("job finished: accuracy"), std::string::npos) << launcher.Output();
  auto result = ReadFile(run + "/result.json");
  ASSERT_TRUE(result.ok());
  EXPECT_GT(nlohmann::json::parse(*result)["metrics"]["accuracy"].get<double>(), 0.80) << *result;
  EXPECT_GT(fs::file_size(run + "/model.tsm"), 100000u);

  // Each node's log came back over ssh; the servers advertised their host's address, and a
  // trainer reached the other host's pserver over TCP.
  const std::string h2 = lab_.Ip("h2"), h3 = lab_.Ip("h3");
  auto ps0 = ReadFile(run + "/logs/pserver-0.log"), ps1 = ReadFile(run + "/logs/pserver-1.log"),
       tr0 = ReadFile(run + "/logs/trainer-0.log"), m0 = ReadFile(run + "/logs/master-0.log");
  ASSERT_TRUE(ps0.ok() && ps1.ok() && tr0.ok() && m0.ok());
  EXPECT_NE(ps0->find("pserver 0 serving at " + h2 + ":"), std::string::npos) << *ps0;
  EXPECT_NE(ps1->find("pserver 1 serving at " + h3 + ":"), std::string::npos) << *ps1;
  EXPECT_NE(tr0->find("pserver 1 at " + h3 + ":"), std::string::npos) << *tr0;
  EXPECT_NE(tr0->find("over tcp"), std::string::npos) << *tr0;
  EXPECT_NE(m0->find("advertising " + lab_.Ip("h1")), std::string::npos) << *m0;
  EXPECT_NE(ps1->find("stopping, as asked by the launcher (finished)"), std::string::npos) << *ps1;
  EXPECT_TRUE(WaitUntil([&] { return ProcessesWith("--job " + job_).empty(); }, std::chrono::seconds(30)))
      << ProcessesText("--job " + job_);
}

TEST_F(SshLaunchTest, NodesStopOnTheirOwnWhenTheLauncherIsKilled) {
  ASSERT_TRUE(UploadFashionMnist(dir_ + "/store"));
  const std::string run = dir_ + "/run";
  Subprocess& launcher = lab_.Start("head", LaunchArgv(WriteSpec(200), run), dir_ + "/launch.log");
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto log = ReadFile(run + "/logs/trainer-1.log");
        return log.ok() && log->find("trainer 1 joined") != std::string::npos;
      },
      std::chrono::seconds(120)))
      << launcher.Output();
  ASSERT_FALSE(ProcessesWith("--job " + job_).empty());
  // SIGKILL: no stop order in etcd. Its ssh clients die with it; each node sees its stdin (or
  // its output) close, and its program goes with it.
  launcher.Kill();
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitUntil([&] { return ProcessesWith("--job " + job_).empty(); }, std::chrono::seconds(60)))
      << ProcessesText("--job " + job_);
  std::printf("every node and etcd gone %.1f s after the launcher was killed\n", SecondsSince(killed));
}

TEST_F(SshLaunchTest, AnUnreachableHostIsNamedByItsLine) {
  std::ofstream(dir_ + "/hosts.txt") << lab_.Ip("h1") << " etcd master pserver\n"
                                     << lab_.Ip("h1").substr(0, lab_.Ip("h1").rfind('.')) << ".99 trainer\n";
  Subprocess& launcher = lab_.Start("head", LaunchArgv(WriteSpec(1), dir_ + "/run"), dir_ + "/launch.log");
  auto code = launcher.Wait(std::chrono::seconds(90));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(launcher.Output().find("hosts.txt:2: cannot run on"), std::string::npos) << launcher.Output();
  EXPECT_TRUE(ProcessesWith("--job " + job_).empty());
}

}  // namespace
}  // namespace tessera::testing
