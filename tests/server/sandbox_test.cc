// Isolation on the platform: two users' jobs at once on a real server whose local backend runs
// each job in its sandbox. User B's trainer (tests/server/hostile_job.py) tries what a hostile user
// with an ordinary account would: the server's database and environment, A's data sets (reading
// the unshared one, writing into the shared one), A's job's logs, model, processes, etcd and
// console, signals to A's processes, the server's API, root; then a fork bomb. Two more of its
// jobs take memory past their limit and fill their namespace's storage. Every attempt is refused;
// A's job ends as it does alone; each hostile job fails with a reason naming the limit it hit.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/cgroup.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/strings.h"
#include "harness/wait.h"
#include "server/api_fixture.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

constexpr char kServerSecret[] = "tessera-test-server-secret-7c1e";

// The host's first address that is not loopback ("" without one).
std::string HostAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* a = list; a && out.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    if (std::string(buf).rfind("127.", 0) != 0) out = buf;
  }
  ::freeifaddrs(list);
  return out;
}

// A digest of every file of a directory (names and contents).
std::string TreeDigest(const std::string& dir) {
  std::set<std::string> lines;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    auto text = ReadFile(e.path().string());
    lines.insert(e.path().string() + " " + (text.ok() ? Sha256Hex(*text) : "unreadable"));
  }
  return Sha256Hex(Join(std::vector<std::string>(lines.begin(), lines.end()), "\n"));
}

class SandboxTest : public ApiFixture {
 protected:
  void SetUp() override {
    if (const std::string why = testing::SandboxesUnavailable(); !why.empty())
      GTEST_SKIP() << "no sandboxes here: " << why;
    ApiFixture::SetUp();
  }
  // Sandboxed, with room for five jobs at once and a small task limit for the fork bomb to meet.
  std::vector<std::string> ServerArgs() override {
    return {"--cpus", "16", "--memory-mb", "32000", "--job-tasks-per-process", "64"};
  }
  std::map<std::string, std::string> ServerEnv() override { return {{"TESSERA_TEST_SECRET", kServerSecret}}; }

  std::string Submit(const std::string& ns, const Json& spec, const std::string& token) {
    Got g = Call("POST", "/api/v1/namespaces/" + ns + "/jobs", spec.dump(), token);
    EXPECT_EQ(g.status, 201) << g.body;
    return g.body.value("id", "");
  }
  Json WaitEnded(const std::string& id, const std::string& token, int seconds) {
    Json j;
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          j = Call("GET", "/api/v1/jobs/" + id, "", token).body;
          const std::string s = j.value("state", "");
          return s == "succeeded" || s == "failed" || s == "stopped";
        },
        std::chrono::seconds(seconds), std::chrono::milliseconds(250)))
        << id << ": " << j.dump(1).substr(0, 3000);
    return j;
  }
  // A small text data set of namespace `ns`.
  void UploadText(const std::string& ns, const std::string& name, const std::string& text,
                  const std::string& token) {
    Got up =
        Call("POST", "/api/v1/namespaces/" + ns + "/uploads",
             Json{{"name", name}, {"format", "text"}, {"files", {{"input", {{"size", text.size()}}}}}}.dump(),
             token);
    ASSERT_EQ(up.status, 201) << up.body;
    const std::string id = up.body["id"];
    ASSERT_EQ(Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=0", text, token,
                   {{"X-Chunk-SHA256", Sha256Hex(text)}})
                  .status,
              200);
    ASSERT_EQ(Call("POST", "/api/v1/uploads/" + id + "/finish", "", token).status, 202);
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return Call("GET", "/api/v1/uploads/" + id, "", token).body.value("state", "") == "done"; },
        std::chrono::seconds(60)));
  }
  // The hostile script as a code package of namespace `ns`; returns its digest.
  std::string PutHostilePackage(const std::string& ns, const std::string& token) {
    const std::string src = dir_ + "/hostile-" + ns;
    fs::create_directories(src);
    fs::copy_file(std::string(TESSERA_SOURCE_DIR) + "/tests/server/hostile_job.py", src + "/hostile_job.py",
                  fs::copy_options::overwrite_existing);
    EXPECT_EQ(std::system(("tar -C " + src + " -cf " + src + ".tar hostile_job.py").c_str()), 0);
    auto tar = ReadFile(src + ".tar");
    EXPECT_TRUE(tar.ok());
    const std::string digest = Sha256Hex(*tar);
    Got put = Call("PUT", "/api/v1/namespaces/" + ns + "/packages/" + digest, *tar, token);
    EXPECT_TRUE(put.status == 200 || put.status == 201) << put.body;
    return digest;
  }
  std::string TrainerLog(const std::string& id, const std::string& token) {
    const Json b = Call("GET", "/api/v1/jobs/" + id + "/logs/trainer-0?offset=0", "", token).body;
    return b.is_object() ? b.value("text", "") : "";
  }
  static double Accuracy(const Json& job) {
    const Json result = job.is_object() ? job.value("result", Json::object()) : Json::object();
    return result.value("metrics", Json::object()).value("accuracy", 0.0);
  }
  std::string Reason(const Json& job) { return job.is_object() ? job.value("reason", "") : ""; }
};

TEST_P(SandboxTest, AHostileUsersJobsReachNothingOfAnotherUsersNorOfTheServer) {
  const std::string ada = SignUpAndLogin("ada", "correct horse");  // the first user: the administrator
  UploadFashionTest(ada);
  UploadText("ada", "secret", "ada's private line one\nada's private line two\n", ada);
  const std::string bob = SignUpAndLogin("bob", "battery staple");
  const std::string carl = SignUpAndLogin("carl", "tr0ub4dor");
  for (const char* to : {"bob", "carl"})
    ASSERT_EQ(Call("PUT", std::string("/api/v1/namespaces/ada/datasets/fm/shares/") + to, "", ada).status,
              204);
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/carl/quota", Json{{"storage_mb", 150}}.dump(), ada).status, 200);
  const std::string data = dir_ + "/server";
  const std::string fm_before = TreeDigest(data + "/datasets/ada/fm");
  const std::string db_before = Sha256Hex(ReadFile(data + "/server.db").value_or(""));

  // A's job alone, then again beside B's.
  const Json a_spec = {{"model", "mlp"}, {"dataset", "fm"}, {"eval_dataset", "fm"},
                       {"passes", 60},   {"trainers", 1},   {"pservers", 1}};
  const Json alone = WaitEnded(Submit("ada", a_spec, ada), ada, 300);
  ASSERT_EQ(alone.value("state", ""), "succeeded") << alone.dump(1);
  const double accuracy_alone = Accuracy(alone);
  ASSERT_GT(accuracy_alone, 0.8);

  const std::string a = Submit("ada", a_spec, ada);
  const std::string a_dir = data + "/jobs/" + a;
  std::string a_etcd, a_console;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto run = ReadFile(a_dir + "/run/run.json");
        auto log = ReadFile(a_dir + "/supervisor.log");
        if (!run.ok() || !log.ok()) return false;
        a_etcd = Json::parse(*run, nullptr, false).value("etcd", "");
        const size_t at = log->rfind("web console: ");
        if (at == std::string::npos) return false;
        a_console = log->substr(at + 13, log->find_first_of(" \n", at + 13) - at - 13);
        return !a_etcd.empty();
      },
      std::chrono::seconds(120)))
      << ReadFile(a_dir + "/supervisor.log").value_or("no log");
  std::vector<std::string> a_pids;
  for (pid_t p : JobPids(a)) a_pids.push_back(std::to_string(p));
  ASSERT_FALSE(a_pids.empty());

  // B's jobs: the attacks and a fork bomb; memory past its limit. C's: its storage filled.
  const std::string b_pkg = PutHostilePackage("bob", bob), c_pkg = PutHostilePackage("carl", carl);
  auto hostile = [&](const std::string& mode) {
    return "python3 hostile_job.py --data-dir " + data + " --a-job " + a + " --a-etcd " + a_etcd +
           " --a-console " + a_console + " --a-pids " + Join(a_pids, ",") + " --server-port " +
           url_.substr(url_.rfind(':') + 1) + " --host-ip '" + HostAddress() + "' --secret " + kServerSecret +
           " --mode " + mode;
  };
  const std::string b1 =
      Submit("bob", {{"package", b_pkg}, {"command", hostile("attacks")}, {"dataset", "ada/fm"}}, bob);
  const std::string b2 = Submit("bob",
                                {{"package", b_pkg},
                                 {"command", hostile("memory")},
                                 {"dataset", "ada/fm"},
                                 {"resources", {{"memory_mb", 128}}}},
                                bob);
  const std::string c1 =
      Submit("carl", {{"package", c_pkg}, {"command", hostile("disk")}, {"dataset", "ada/fm"}}, carl);

  const Json j1 = WaitEnded(b1, bob, 300), j2 = WaitEnded(b2, bob, 300), j3 = WaitEnded(c1, carl, 300);
  const Json a_done = WaitEnded(a, ada, 300);

  // Every attempt was refused, and each was made.
  const std::string log = TrainerLog(b1, bob);
  EXPECT_EQ(log.find("BREACH"), std::string::npos) << log;
  for (const char* what : {"server-db", "data-dir", "search", "server-env", "a-dataset", "a-dataset-list",
                           "write-shared", "corrupt-shared", "a-logs", "a-model", "proc", "signals", "root",
                           "shadow", "a-etcd", "a-console", "server-api", "privileges"})
    EXPECT_NE(log.find(std::string("BLOCKED ") + what + ":"), std::string::npos)
        << what << " was not tried:\n"
        << log;
  EXPECT_NE(log.find("ATTACKS DONE"), std::string::npos) << log;
  EXPECT_NE(log.find("RUNS AS uid=61"), std::string::npos) << "not as its namespace's user:\n" << log;

  // Each hostile job failed, naming the limit it met.
  EXPECT_EQ(j1.value("state", ""), "failed");
  EXPECT_NE(Reason(j1).find("process limit"), std::string::npos) << Reason(j1);
  EXPECT_EQ(j2.value("state", ""), "failed");
  EXPECT_NE(Reason(j2).find("out of memory (limit 640 MiB)"), std::string::npos) << Reason(j2);
  EXPECT_EQ(j3.value("state", ""), "failed");
  EXPECT_NE(Reason(j3).find("storage quota (150 MB)"), std::string::npos) << Reason(j3);
  EXPECT_NE(TrainerLog(c1, carl).find("BLOCKED file-size"), std::string::npos) << TrainerLog(c1, carl);

  // A's job went on as alone; A's data and the server's database are as they were.
  ASSERT_EQ(a_done.value("state", ""), "succeeded") << a_done.dump(1);
  EXPECT_NEAR(Accuracy(a_done), accuracy_alone, 0.01);
  EXPECT_EQ(TreeDigest(data + "/datasets/ada/fm"), fm_before) << "ada's shared data set changed";
  EXPECT_FALSE(fs::exists(data + "/datasets/ada/fm/intruder"));
  EXPECT_EQ(Call("GET", "/api/v1/me", "", ada).status, 200) << "the server no longer answers";
  (void)db_before;  // the server writes its own database all along; its answers above are the check
  // Nothing of any job is left running.
  for (const std::string& id : {a, b1, b2, c1})
    EXPECT_FALSE(Cgroup::Open(CgroupLayout::Detect(), "tessera-job-" + id, false).ok())
        << id << "'s group is left";
}

INSTANTIATE_TEST_SUITE_P(Backends, SandboxTest, ::testing::Values("sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
