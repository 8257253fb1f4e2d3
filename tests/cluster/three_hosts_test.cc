// A job across three hosts (network namespaces the test creates): "core" runs etcd and the
// master, "ps" runs two pservers, "tr" runs two trainers. Every node finds its own address (the
// master binds 0.0.0.0 and advertises its host's address; the pservers take theirs from the route
// toward etcd; the replacements from POD_IP), the trainers reach the pservers over TCP (never
// shared memory across hosts), and the job survives the ps host being killed: two pservers
// started on a fourth host take over from the checkpoints on the shared disk. The final accuracy
// matches `tessera local` with the same settings. A pserver told to advertise loopback while etcd
// is on another host refuses to start. Needs root; skipped with a message otherwise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "common/files.h"
#include "data/data_fixture.h"
#include "harness/netns.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

class ThreeHostsTest : public TempDirTest {};

double FinalAccuracy(const std::string& log, int passes) {
  std::smatch m;
  std::regex re("pass " + std::to_string(passes) + " evaluated on fm-test: accuracy=([0-9.]+)");
  return std::regex_search(log, m, re) ? std::stod(m[1]) : -1;
}

TEST_F(ThreeHostsTest, JobSpansHostsOverTcpAndSurvivesAPserverHostBeingKilled) {
  NetLab lab;
  std::string why;
  if (!lab.Open(&why)) GTEST_SKIP() << "network namespaces cannot be created here (needs root): " << why;
  ASSERT_TRUE(lab.AddHost("core", 1));
  ASSERT_TRUE(lab.AddHost("ps", 2));
  ASSERT_TRUE(lab.AddHost("tr", 3));
  ASSERT_TRUE(lab.AddHost("ps2", 4));

  const std::string store = dir_ + "/store";
  ASSERT_TRUE(UploadFashionMnist(store));
  const std::string tessera = BuildPath("src/tessera"), core = lab.Ip("core"),
                    etcd = lab.EtcdEndpoint("core");
  const std::string passes = "3", ttl = "3", ckpt = dir_ + "/checkpoints";  // ckpt: the shared disk
  lab.Start("core", lab.EtcdArgv("core", dir_ + "/etcd"), dir_ + "/etcd.log");
  std::string out;
  ASSERT_TRUE(WaitUntil(
      [&] {
        return NetLab::Sh(
                   "ip netns exec " + lab.Ns("core") + " " + tessera + " job create --etcd " + etcd +
                       " --job three --pservers 2 --mode sync --optimizer adam:lr=0.001 --min-trainers 2",
                   &out) == 0;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(200)))
      << out;

  // A pserver that would advertise loopback while etcd is elsewhere refuses, naming the flag.
  Subprocess& wrong =
      lab.Start("ps", {tessera, "pserver", "--etcd", etcd, "--job", "three", "--host", "127.0.0.1"},
                dir_ + "/pserver-wrong.log");
  auto wrong_code = wrong.Wait(std::chrono::seconds(20));
  ASSERT_TRUE(wrong_code.has_value()) << wrong.Output();
  EXPECT_EQ(*wrong_code, 1);
  EXPECT_NE(wrong.Output().find("--advertise"), std::string::npos) << wrong.Output();

  Subprocess& master = lab.Start(
      "core",
      {tessera,       "master", "--etcd",      etcd,      "--job",       "three",   "--store",     store,
       "--dataset",   "fm",     "--passes",    passes,    "--listen",    "0.0.0.0", "--advertise", core,
       "--lease-ttl", ttl,      "--http-host", "0.0.0.0", "--http-port", "8080"},
      dir_ + "/master.log");
  std::vector<Subprocess*> pservers;
  for (int i = 0; i < 2; ++i) {
    pservers.push_back(&lab.Start("ps",
                                  {tessera, "pserver", "--etcd", etcd, "--job", "three", "--lease-ttl", ttl,
                                   "--checkpoint-dir", ckpt, "--checkpoint-every", "0.5"},
                                  dir_ + "/pserver-" + std::to_string(i) + ".log"));
  }
  for (Subprocess* p : pservers) {
    ASSERT_TRUE(p->WaitForOutput("serving at " + lab.Ip("ps"), std::chrono::seconds(30))) << p->Output();
    EXPECT_NE(p->Output().find("from the route toward etcd"), std::string::npos) << p->Output();
  }
  std::vector<Subprocess*> trainers;
  for (int t = 0; t < 2; ++t) {
    trainers.push_back(&lab.Start("tr",
                                  {tessera, "train", "--etcd", etcd, "--job", "three", "--model", "mlp",
                                   "--trainer-id", std::to_string(t), "--store", store, "--eval-dataset",
                                   "fm-test", "--lease-ttl", ttl, "--model-arg", "hidden=32"},
                                  dir_ + "/trainer-" + std::to_string(t) + ".log"));
  }
  // The console answers on the advertised address, from another host, and says the master leads.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return NetLab::Sh("ip netns exec " + lab.Ns("tr") + " curl -sf http://" + core + ":8080/readyz",
                          &out) == 0;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(200)))
      << out << master.Output();
  EXPECT_NE(out.find("leading"), std::string::npos) << out;
  // Off loopback, the rest of the console needs the job's token: refused without it, opened by the
  // link `tessera status` prints (it sets the cookie the page's own requests then carry).
  auto curl = [&](const std::string& args, std::string* body) {
    return NetLab::Sh("ip netns exec " + lab.Ns("tr") + " curl -s -o /dev/stderr -w '%{http_code}' " + args,
                      body);
  };
  std::string body;
  curl("http://" + core + ":8080/api/job", &body);
  EXPECT_NE(body.find("401"), std::string::npos) << body;
  EXPECT_NE(body.find("console token"), std::string::npos) << body;
  ASSERT_EQ(
      NetLab::Sh("ip netns exec " + lab.Ns("tr") + " " + tessera + " status --etcd " + etcd + " --job three",
                 &out),
      0)
      << out;
  std::smatch link;
  ASSERT_TRUE(
      std::regex_search(out, link, std::regex("console: (http://[0-9.]+:8080/\\?token=[0-9a-f]{32})")))
      << out;
  curl("-c " + dir_ + "/cookies '" + link[1].str() + "'", &body);
  EXPECT_NE(body.find("200"), std::string::npos) << body;
  curl("-b " + dir_ + "/cookies http://" + core + ":8080/api/job", &body);
  EXPECT_NE(body.find("200"), std::string::npos) << "the cookie opens the API: " << body;

  // Training is under way over TCP, and both pservers have checkpointed past the initial values.
  static const std::regex recorded("checkpoint of version ([1-9][0-9]*) recorded");
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::smatch m;
        std::string a = pservers[0]->Output(), b = pservers[1]->Output();
        return std::regex_search(a, m, recorded) && std::regex_search(b, m, recorded);
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << pservers[0]->Output() << trainers[0]->Output();
  for (Subprocess* t : trainers) {
    std::string log = t->Output();
    EXPECT_NE(log.find("over tcp"), std::string::npos) << log;
    EXPECT_EQ(log.find("over shm"), std::string::npos) << log;
  }

  // The ps host dies: every process on it killed, its network gone.
  lab.KillHost("ps");
  ASSERT_TRUE(lab.SetLink("ps", false));
  auto killed_at = std::chrono::steady_clock::now();
  // Two pservers on a new host take the indices over from the shared checkpoints.
  std::vector<Subprocess*> replacements;
  for (int i = 0; i < 2; ++i) {
    replacements.push_back(&lab.Start("ps2",
                                      {tessera, "pserver", "--etcd", etcd, "--job", "three", "--lease-ttl",
                                       ttl, "--checkpoint-dir", ckpt, "--checkpoint-every", "0.5"},
                                      dir_ + "/pserver-new-" + std::to_string(i) + ".log",
                                      {{"POD_IP", lab.Ip("ps2")}}));
  }
  for (Subprocess* p : replacements) {
    ASSERT_TRUE(p->WaitForOutput("serving at " + lab.Ip("ps2"), std::chrono::seconds(60))) << p->Output();
    EXPECT_NE(p->Output().find("(from POD_IP)"), std::string::npos) << p->Output();
    EXPECT_TRUE(p->WaitForOutput("loaded the checkpoint of version", std::chrono::seconds(30)))
        << p->Output();
  }
  double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();

  for (Subprocess* t : trainers) {
    auto code = t->Wait(std::chrono::seconds(300));
    ASSERT_TRUE(code.has_value()) << t->Output() << replacements[0]->Output();
    EXPECT_EQ(*code, 0) << t->Output();
  }
  // They went on with the new host's pservers.
  for (int i = 0; i < 2; ++i) {
    const std::string moved = "pserver " + std::to_string(i) + " at " + lab.Ip("ps2");
    EXPECT_NE((trainers[0]->Output() + trainers[1]->Output()).find(moved), std::string::npos) << moved;
  }
  const double cluster = FinalAccuracy(trainers[0]->Output() + trainers[1]->Output(), 3);
  ASSERT_GT(cluster, 0) << trainers[0]->Output();

  // The same job with `tessera local` on this machine.
  auto local = Tessera({"local", "--run", dir_ + "/local", "--store", store, "--dataset", "fm",
                        "--eval-dataset", "fm-test", "--model", "mlp", "--model-arg", "hidden=32",
                        "--pservers", "2", "--trainers", "2", "--passes", passes},
                       std::chrono::seconds(300));
  ASSERT_EQ(local.code, 0) << local.out;
  auto result = ReadFile(dir_ + "/local/result.json");
  ASSERT_TRUE(result.ok()) << result.status();
  const double alone = nlohmann::json::parse(*result)["metrics"]["accuracy"].get<double>();
  EXPECT_NEAR(cluster, alone, 0.03);
  std::printf(
      "three hosts: accuracy %.4f (tessera local: %.4f); replacements served %.1f s after the ps host died\n",
      cluster, alone, takeover_s);
}

}  // namespace
}  // namespace tessera::testing
