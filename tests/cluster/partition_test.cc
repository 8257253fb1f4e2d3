// A network partition between hosts: four network namespaces created by the test (a switch
// with a bridge, and three hosts joined to it by veth pairs): "core" runs etcd, the master and a
// standby pserver, "ps" runs pserver 0, "tr" runs two trainers. The test cuts the ps host off
// (its switch port down) for longer than the lease TTL and shows that the job recovers (the
// standby takes index 0 from the checkpoint, the trainers go on, every pass finishes) and that
// the cut-off pserver is fenced: once its host is back it serves nothing and exits with code 3.
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); skipped with a message where that is not allowed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>

#include "data/data_fixture.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

class PartitionTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    tag_ = "tsr" + std::to_string(::getpid() % 100000);
    subnet_ = "10.213." + std::to_string(::getpid() % 250 + 1) + ".";
  }

  void TearDown() override {
    procs_.clear();  // SIGKILL and reap whatever still runs
    for (const auto& ns : namespaces_) (void)Sh("ip netns del " + ns);
    TempDirTest::TearDown();
  }

  // Runs a shell command; returns its exit code, output in *out.
  int Sh(const std::string& cmd, std::string* out = nullptr) {
    std::string full = cmd + " 2>&1";
    FILE* f = ::popen(full.c_str(), "r");
    if (!f) return -1;
    char buf[512];
    std::string text;
    while (fgets(buf, sizeof buf, f)) text += buf;
    int rc = ::pclose(f);
    if (out) *out = text;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  std::string Ns(const std::string& host) const { return tag_ + host; }
  std::string Ip(int host) const { return subnet_ + std::to_string(host); }
  std::string SwitchPort(const std::string& host) const { return tag_ + host + "b"; }

  // The switch namespace with a bridge, and a host namespace on it at subnet.<n>.
  ::testing::AssertionResult AddHost(const std::string& host, int n) {
    const std::string ns = Ns(host), a = tag_ + host + "a", b = SwitchPort(host), sw = Ns("sw");
    for (const std::string& cmd :
         {"ip netns add " + ns, "ip link add " + a + " type veth peer name " + b,
          "ip link set " + a + " netns " + ns, "ip link set " + b + " netns " + sw,
          "ip -n " + ns + " addr add " + Ip(n) + "/24 dev " + a, "ip -n " + ns + " link set " + a + " up",
          "ip -n " + ns + " link set lo up", "ip -n " + sw + " link set " + b + " master br0",
          "ip -n " + sw + " link set " + b + " up"}) {
      std::string out;
      if (Sh(cmd, &out) != 0) return ::testing::AssertionFailure() << cmd << ": " << out;
      if (cmd.rfind("ip netns add", 0) == 0) namespaces_.push_back(ns);
    }
    return ::testing::AssertionSuccess();
  }

  Subprocess& Start(const std::string& name, const std::string& host, std::vector<std::string> argv) {
    SpawnOptions o;
    o.argv = {"/usr/sbin/ip", "netns", "exec", Ns(host)};
    o.argv.insert(o.argv.end(), argv.begin(), argv.end());
    o.log_path = dir_ + "/" + name + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    procs_.push_back(std::move(*p));
    return *procs_.back();
  }

  std::string tag_, subnet_;
  std::vector<std::string> namespaces_;
  std::vector<std::unique_ptr<Subprocess>> procs_;
};

TEST_F(PartitionTest, CutOffPserverIsReplacedAndFencedWhenItsHostComesBack) {
  std::string out;
  if (::geteuid() != 0 || Sh("ip netns add " + Ns("sw"), &out) != 0) {
    GTEST_SKIP() << "network namespaces cannot be created here (needs root with CAP_SYS_ADMIN and "
                    "CAP_NET_ADMIN): "
                 << out;
  }
  namespaces_.push_back(Ns("sw"));
  ASSERT_EQ(
      Sh("ip -n " + Ns("sw") + " link add br0 type bridge && ip -n " + Ns("sw") + " link set br0 up", &out),
      0)
      << out;
  ASSERT_TRUE(AddHost("core", 1));
  ASSERT_TRUE(AddHost("ps", 2));
  ASSERT_TRUE(AddHost("tr", 3));

  const std::string f = "/usr/share/datasets/fashion-mnist/", store = dir_ + "/store";
  for (auto [name, images, labels] :
       {std::tuple{"fm", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
        std::tuple{"fm-test", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}}) {
    auto up = Tessera({"upload", "--store", store, "--dataset", name, "--format", "idx", "--images",
                       f + images, "--labels", f + labels});
    ASSERT_EQ(up.code, 0) << up.out;
  }
  const std::string tessera = BuildPath("src/tessera"), etcd = Ip(1) + ":2379", ttl = "2";
  Subprocess& etcd_proc = Start(
      "etcd", "core",
      {"/usr/bin/etcd", "--name=part", "--data-dir=" + dir_ + "/etcd", "--listen-client-urls=http://" + etcd,
       "--advertise-client-urls=http://" + etcd, "--listen-peer-urls=http://" + Ip(1) + ":2380",
       "--initial-advertise-peer-urls=http://" + Ip(1) + ":2380",
       "--initial-cluster=part=http://" + Ip(1) + ":2380", "--log-level=warn"});
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
  ASSERT_EQ(Sh("ip -n " + Ns("sw") + " link set " + SwitchPort("ps") + " down", &out), 0) << out;
  auto cut_at = std::chrono::steady_clock::now();
  // The standby takes index 0 once the cut-off one's lease expires, from the checkpoint.
  ASSERT_TRUE(standby.WaitForOutput("pserver 0 serving at " + Ip(1), std::chrono::seconds(60)))
      << standby.Output() << ps0.Output();
  double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();
  EXPECT_TRUE(standby.WaitForOutput("loaded the checkpoint of version", std::chrono::seconds(30)))
      << standby.Output();
  // Stay cut for a while longer than the TTL, then heal.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_EQ(Sh("ip -n " + Ns("sw") + " link set " + SwitchPort("ps") + " up", &out), 0) << out;

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
