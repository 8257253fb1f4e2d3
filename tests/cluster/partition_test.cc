// A network partition between hosts: four network namespaces created by the test (a switch
// with a bridge, and three hosts joined to it by veth pairs): "core" runs etcd, the master and a
// standby pserver, "ps" runs pserver 0, "tr" runs two trainers. The test cuts the ps host off
// (its switch port down) for longer than the lease TTL and shows that the job recovers (the
// standby takes index 0 from the checkpoint, the trainers go on, every pass finishes) and that
// the cut-off pserver is fenced: once its host is back it serves nothing and exits with code 3.
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); skipped with a message where that is not allowed.
#include <gtest/gtest.h>
#include <cstdlib>
#include <regex>

#include "data/data_fixture.h"
#include "harness/netns.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

class PartitionTest : public TempDirTest {
 protected:
  Subprocess& Start(const std::string& name, const std::string& host, std::vector<std::string> argv) {
    return lab_->Start(host, std::move(argv), dir_ + "/" + name + ".log");
  }
  int Sh(const std::string& cmd, std::string* out = nullptr) { return NetLab::Sh(cmd, out); }
  std::string Ns(const std::string& host) const { return lab_->Ns(host); }
  std::string Ip(int n) const { return lab_->Ip(n); }

  void TearDown() override {
    lab_.reset();  // its processes end before their directory goes
    TempDirTest::TearDown();
  }

  std::unique_ptr<NetLab> lab_ = std::make_unique<NetLab>();
};

TEST_F(PartitionTest, CutOffPserverIsReplacedAndFencedWhenItsHostComesBack) {
  std::string out;
  if (!lab_->Open(&out)) {
    GTEST_SKIP() << "network namespaces cannot be created here (needs root with CAP_SYS_ADMIN and "
                    "CAP_NET_ADMIN): "
                 << out;
  }
  ASSERT_TRUE(lab_->AddHost("core", 1));
  ASSERT_TRUE(lab_->AddHost("ps", 2));
  ASSERT_TRUE(lab_->AddHost("tr", 3));

  const std::string store = dir_ + "/store";
  ASSERT_TRUE(UploadFashionMnist(store));
  const std::string tessera = BuildPath("src/tessera"), etcd = Ip(1) + ":2379", ttl = "2";
  Subprocess& etcd_proc = Start("etcd", "core", lab_->EtcdArgv("core", dir_ + "/etcd"));
  (void)etcd_proc;
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Sh("ip netns exec " + Ns("core") + " " + tessera + " job create --etcd " + etcd +
                      " --job part --pservers 1 --mode sync --optimizer adam:lr=0.001 --min-trainers 2",
                  &out) == 0;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(200)))
      << out;

  Start("master", "core",
        {tessera, "master", "--etcd", etcd, "--job", "part", "--store", store, "--dataset", "fm", "--passes",
         "3", "--host", Ip(1), "--lease-ttl", ttl});
  const std::string ckpt = dir_ + "/checkpoints";  // the shared file system of both pserver hosts
  Subprocess& ps0 = Start("pserver-cut", "ps",
                          {tessera, "pserver", "--etcd", etcd, "--job", "part", "--host", Ip(2),
                           "--lease-ttl", ttl, "--checkpoint-dir", ckpt, "--checkpoint-every", "0.5"});
  ASSERT_TRUE(ps0.WaitForOutput("pserver 0 serving at " + Ip(2), std::chrono::seconds(30))) << ps0.Output();
  Subprocess& standby = Start("pserver-standby", "core",
                              {tessera, "pserver", "--etcd", etcd, "--job", "part", "--host", Ip(1),
                               "--lease-ttl", ttl, "--checkpoint-dir", ckpt, "--checkpoint-every", "0.5"});
  std::vector<Subprocess*> trainers;
  for (int t = 0; t < 2; ++t) {
    trainers.push_back(&Start("trainer-" + std::to_string(t), "tr",
                              {tessera, "train", "--etcd", etcd, "--job", "part", "--model", "mlp",
                               "--trainer-id", std::to_string(t), "--store", store, "--eval-dataset",
                               "fm-test", "--lease-ttl", ttl, "--model-arg", "hidden=32"}));
  }
  // Training is under way and pserver 0 has checkpointed past the initial values.
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::smatch m;
        std::string log = ps0.Output();
        static const std::regex re("checkpoint of version ([1-9][0-9]*) recorded");
        return std::regex_search(log, m, re);
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << ps0.Output() << trainers[0]->Output();

  // Cut the ps host off.
  ASSERT_TRUE(lab_->SetLink("ps", false));
  auto cut_at = std::chrono::steady_clock::now();
  // The standby takes index 0 once the cut-off one's lease expires, from the checkpoint.
  ASSERT_TRUE(standby.WaitForOutput("pserver 0 serving at " + Ip(1), std::chrono::seconds(60)))
      << standby.Output() << ps0.Output();
  double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();
  EXPECT_TRUE(standby.WaitForOutput("loaded the checkpoint of version", std::chrono::seconds(30)))
      << standby.Output();
  // Stay cut for a while longer than the TTL, then heal.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_TRUE(lab_->SetLink("ps", true));

  // Fenced: the cut-off pserver exits with 3 (lease lost) and never records a checkpoint again.
  auto code = ps0.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "the cut-off pserver is still running after its host came back:\n"
                                << ps0.Output();
  EXPECT_EQ(*code, 3) << ps0.Output();
  std::string cut_log = ps0.Output();
  EXPECT_NE(cut_log.find("stops serving"), std::string::npos) << cut_log;

  // The job recovers: both trainers finish every pass, with a useful model.
  for (Subprocess* t : trainers) {
    auto tc = t->Wait(std::chrono::seconds(300));
    ASSERT_TRUE(tc.has_value()) << t->Output() << standby.Output();
    EXPECT_EQ(*tc, 0) << t->Output();
  }
  std::smatch m;
  std::string t0 = trainers[0]->Output() + trainers[1]->Output();
  ASSERT_TRUE(std::regex_search(t0, m, std::regex("pass 3 evaluated on fm-test: accuracy=([0-9.]+)"))) << t0;
  EXPECT_GE(std::stod(m[1]), 0.75) << t0;
  std::printf("partition: standby took index 0 %.1f s after the cut (lease TTL %s s); final accuracy %s\n",
              takeover_s, ttl.c_str(), m[1].str().c_str());
}

}  // namespace
}  // namespace tessera::testing
