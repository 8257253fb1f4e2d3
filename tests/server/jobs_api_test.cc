// The platform's jobs through a real `tessera server` running real `tessera local` jobs, on each
// database backend: a built-in model trained to the end, with its cost, evaluation, events and
// logs still there after it ended and after the server was killed and restarted mid-job (it
// re-attaches); a queued job starting when the quota frees; preemption shrinking a low-priority
// job and growing it back; stop, scale, delete; bad submissions refused with the reason.
#include <filesystem>
#include <set>

#include "common/digest.h"
#include "common/files.h"
#include "harness/wait.h"
#include "server/api_fixture.h"

namespace tessera::server {
namespace {

// Polls `cond` every 200 ms (each poll is a request to the server) until it holds or time runs out.
bool Until(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  return testing::WaitUntil(cond, timeout, std::chrono::milliseconds(200));
}

class JobsApiTest : public ApiFixture {
 protected:
  void SetUp() override {
    ApiFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    token_ = SignUpAndLogin("ada", "correct horse");
    UploadFashionTest(token_);
  }
  std::string Submit(const Json& spec, const std::string& token = "") {
    Got g = Call("POST", "/api/v1/namespaces/ada/jobs", spec.dump(), token.empty() ? token_ : token);
    EXPECT_EQ(g.status, 201) << g.body;
    return g.body.value("id", "");
  }
  Json Job(const std::string& id) { return Call("GET", "/api/v1/jobs/" + id, "", token_).body; }
  // Waits until the job is in `state`; returns the job.
  Json WaitState(const std::string& id, const std::string& state, int seconds = 120) {
    Json j;
    bool ok = Until(
        [&] {
          j = Job(id);
          return j.value("state", "") == state;
        },
        std::chrono::seconds(seconds));
    EXPECT_TRUE(ok) << "job " << id << " not " << state << ": " << j.dump(1).substr(0, 3000);
    return j;
  }
  bool HasEvent(const Json& job, const std::string& text) {
    for (const auto& e : job["events"])
      if (e.value("reason", "").find(text) != std::string::npos) return true;
    return false;
  }
  std::string token_;
};

TEST_P(JobsApiTest, ABuiltInJobRunsToTheEndAndItsHistoryOutlivesItAndAServerKill) {
  const std::string id =
      Submit({{"model", "mlp"}, {"dataset", "fm"}, {"eval_dataset", "fm"}, {"passes", 40}, {"trainers", 2}});
  Json running = WaitState(id, "running");
  // The server dies mid-job; the job goes on, and a new server takes it back.
  server_->Kill();
  EXPECT_FALSE(JobPids(id).empty()) << "the job died with its server";
  StartServer();
  Json done = WaitState(id, "succeeded", 240);
  EXPECT_TRUE(HasEvent(done, "every pass done")) << done["events"];
  EXPECT_EQ(done["result"]["passes"], 40) << done["result"];
  Got m = Call("GET", "/api/v1/jobs/" + id + "/metrics", "", token_);
  ASSERT_EQ(m.status, 200);
  int costs = 0;
  std::set<std::pair<int64_t, std::string>> evals;  // (pass, metric)
  int64_t last_seq = 0;
  for (const auto& p : m.body["points"]) {
    costs += p["type"] == "cost";
    if (p["type"] == "eval") evals.insert({p.value("pass", int64_t{0}), p.value("metric", "")});
    EXPECT_GT(p["seq"].get<int64_t>(), last_seq) << "a point twice or out of order";
    last_seq = p["seq"];
  }
  EXPECT_GT(costs, 10);
  // Accuracy and loss after each of 40 passes (a pass's evaluation reported by two trainers
  // counts once; that every seq is new is checked above).
  EXPECT_EQ(evals.size(), 80u)
      << "accuracy and loss after each of 40 passes";  // none lost across the restart
  Got logs = Call("GET", "/api/v1/jobs/" + id + "/logs", "", token_);
  EXPECT_GE(logs.body["logs"].size(), 5u) << logs.body;  // supervisor, etcd, master, pserver, trainers
  Got tail = Call("GET", "/api/v1/jobs/" + id + "/logs/trainer-0?tail=5", "", token_);
  EXPECT_NE(tail.body.value("text", "").find("trainer done"), std::string::npos) << tail.body;

  // After the job and after another restart, all of it is still there.
  server_->Kill();
  StartServer();
  Json again = Job(id);
  EXPECT_EQ(again["state"], "succeeded");
  EXPECT_EQ(Call("GET", "/api/v1/jobs/" + id + "/metrics", "", token_).body["points"].size(),
            m.body["points"].size());
  EXPECT_EQ(Call("GET", "/api/v1/jobs/" + id + "/logs/trainer-0?tail=5", "", token_).body["text"],
            tail.body["text"]);
  // Following an ended job's log returns its lines and ends.
  httplib::Headers h = {{"Authorization", "Bearer " + token_}};
  auto follow = client_->Get("/api/v1/jobs/" + id + "/logs/trainer-0/follow?offset=0", h);
  ASSERT_TRUE(follow);
  EXPECT_NE(follow->body.find("data: "), std::string::npos);
  EXPECT_NE(follow->body.find("event: end"), std::string::npos);
  // Deleted: gone, files too.
  EXPECT_EQ(Call("DELETE", "/api/v1/jobs/" + id, "", token_).status, 204);
  EXPECT_EQ(Call("GET", "/api/v1/jobs/" + id, "", token_).status, 404);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/server/jobs/" + id));
}

TEST_P(JobsApiTest, AQueuedJobStartsWhenTheQuotaFreesAndStopEndsJobs) {
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/quota", R"({"jobs": 1})", token_).status, 200);
  const std::string first = Submit({{"model", "mlp"}, {"dataset", "fm"}, {"passes", 1000}});
  const std::string second = Submit({{"model", "mlp"}, {"dataset", "fm"}, {"passes", 1}});
  WaitState(first, "running");
  Json waiting = Job(second);
  EXPECT_EQ(waiting["state"], "queued");
  EXPECT_NE(waiting["reason"].get<std::string>().find("over the quota of namespace 'ada'"), std::string::npos)
      << waiting["reason"];
  Got quota = Call("GET", "/api/v1/namespaces/ada/quota", "", token_);
  EXPECT_EQ(quota.body["usage"]["jobs"], 1) << quota.body;
  EXPECT_EQ(quota.body["limits"]["jobs"], 1);
  // The first is stopped; the second starts and finishes.
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + first + "/stop", "", token_).status, 202);
  Json stopped = WaitState(first, "stopped");
  EXPECT_TRUE(HasEvent(stopped, "stopped on request"));
  WaitState(second, "succeeded");
  EXPECT_TRUE(JobPids(first).empty()) << testing::ProcessesText(first);
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + first + "/stop", "", token_).status, 409);  // already ended
  // A queued job stopped never starts.
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/quota", R"({"jobs": 0})", token_).status, 200);
  Got over =
      Call("POST", "/api/v1/namespaces/ada/jobs", Json{{"model", "mlp"}, {"dataset", "fm"}}.dump(), token_);
  EXPECT_EQ(over.status, 429) << over.body;  // can never run: refused
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/quota", "{}", token_).status, 200);
}

TEST_P(JobsApiTest, WithOverQuotaRefuseASubmissionOverTheQuotaIsRefusedNotQueued) {
  server_->Kill();
  StartServer({"--over-quota", "refuse"});
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/quota", R"({"jobs": 1})", token_).status, 200);
  const std::string first = Submit({{"model", "mlp"}, {"dataset", "fm"}, {"passes", 1000}});
  WaitState(first, "running");
  Got over =
      Call("POST", "/api/v1/namespaces/ada/jobs", Json{{"model", "mlp"}, {"dataset", "fm"}}.dump(), token_);
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_NE(over.body["error"]["message"].get<std::string>().find("over the quota of 'ada'"),
            std::string::npos)
      << over.body;
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/jobs", "", token_).body["jobs"].size(), 1u)
      << "nothing stored";
  // Once the first has ended, the same submission is taken.
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + first + "/stop", "", token_).status, 202);
  WaitState(first, "stopped");
  const std::string second = Submit({{"model", "mlp"}, {"dataset", "fm"}, {"passes", 1}});
  WaitState(second, "succeeded");
}

TEST_P(JobsApiTest, PreemptionShrinksALowPriorityJobAndGrowsItBack) {
  // Room for 2 CPUs: the low job (1 pserver + 2 trainers at 0.5) takes 1.5; the high one needs 1.
  server_->Kill();
  StartServer({"--cpus", "2"});
  const std::string low =
      Submit({{"model", "mlp"}, {"dataset", "fm"}, {"passes", 1000}, {"trainers", 2}, {"trainers_min", 1}});
  WaitState(low, "running");
  EXPECT_EQ(Job(low)["trainers"], 2);
  const std::string high = Submit({{"model", "mlp"}, {"dataset", "fm"}, {"passes", 2}, {"priority", 5}});
  WaitState(high, "succeeded");
  Json l = Job(low);
  EXPECT_TRUE(HasEvent(l, "shrunk from 2 trainers for job " + high)) << l["events"];
  EXPECT_EQ(l["state"], "running") << "shrunk, not killed";
  ASSERT_TRUE(Until([&] { return Job(low)["trainers"] == 2; }, std::chrono::seconds(30)))
      << Job(low)["events"];
  EXPECT_TRUE(HasEvent(Job(low), "grown from 1 trainers"));
  // Scaled by hand; then stopped.
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + low + "/scale", R"({"trainers": 1})", token_).status, 202);
  EXPECT_EQ(Job(low)["trainers"], 1);
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + low + "/scale", R"({"trainers": 0})", token_).status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + low + "/stop", "", token_).status, 202);
  WaitState(low, "stopped");
}

TEST_P(JobsApiTest, TrainersThatExitWithoutTrainingFailTheJobAndAnEndedJobListsNoLiveWorker) {
  // A package whose command "succeeds" at once, before reading any data.
  const std::string src = dir_ + "/lazy";
  std::filesystem::create_directories(src);
  ASSERT_TRUE(WriteFileAtomic(src + "/train.py", "print('nothing to do')\n").ok());
  ASSERT_EQ(std::system(("tar -C " + src + " -cf " + dir_ + "/lazy.tar train.py").c_str()), 0);
  auto tar = ReadFile(dir_ + "/lazy.tar");
  ASSERT_TRUE(tar.ok());
  const std::string digest = Sha256Hex(*tar);
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/packages/" + digest, *tar, token_).status, 201);
  const std::string id =
      Submit({{"package", digest}, {"command", "python3 train.py"}, {"dataset", "fm"}, {"trainers", 2}});
  Json ended = WaitState(id, "failed", 180);
  EXPECT_NE(ended.value("reason", "").find("every trainer exited with code 0, but the job is not done"),
            std::string::npos)
      << ended.value("reason", "");
  // What it last said of its nodes was said while they ran: none is shown alive now.
  const Json workers = ended["workers"];
  EXPECT_TRUE(workers.value("ended", false)) << workers;
  for (const auto& n : workers.value("nodes", Json::array())) EXPECT_NE(n.value("state", ""), "alive") << n;
}

TEST_P(JobsApiTest, BadSubmissionsAreRefusedWithTheReason) {
  auto refused = [&](const Json& spec, int status, const std::string& says) {
    Got g = Call("POST", "/api/v1/namespaces/ada/jobs", spec.dump(), token_);
    EXPECT_EQ(g.status, status) << spec << " -> " << g.body;
    EXPECT_NE(g.body["error"]["message"].get<std::string>().find(says), std::string::npos) << g.body;
  };
  refused({{"model", "mpl"}, {"dataset", "fm"}}, 400, "did you mean 'mlp'");
  refused({{"model", "mlp"}, {"dataset", "nope"}}, 404, "no data set 'nope'");
  refused({{"model", "mlp"}}, 400, "'dataset' is required");
  refused({{"model", "mlp"}, {"dataset", "fm"}, {"trainers", 0}}, 400, "trainers");
  refused({{"model", "mlp"}, {"dataset", "fm"}, {"trainers", 2}, {"trainers_min", 3}}, 400, "above trainers");
  refused({{"model", "mlp"}, {"dataset", "fm"}, {"mode", "sink"}}, 400, "mode");
  refused({{"model", "mlp"}, {"dataset", "fm"}, {"optimizer", "adam:lr=oops"}}, 400, "optimizer");
  refused({{"model", "mlp"}, {"dataset", "fm"}, {"pasess", 2}}, 400, "did you mean 'passes'");
  refused({{"dataset", "fm"}, {"package", std::string(64, 'a')}, {"command", "python3 x.py"}}, 404,
          "upload it first");
  refused({{"model", "mlp"}, {"dataset", "fm"}, {"resources", {{"gpus", 1}}}}, 429, "can never run here");
  // Code packages: their digest must match; a tar leaving its directory is refused.
  const std::string src = dir_ + "/code";
  std::filesystem::create_directories(src);
  ASSERT_TRUE(WriteFileAtomic(src + "/train.py", "print('hi')\n").ok());
  ASSERT_EQ(std::system(("tar -C " + src + " -cf " + dir_ +
                         "/evil.tar --transform 's,^train.py,/etc/evil.py,' train.py 2>/dev/null")
                            .c_str()),
            0);
  auto evil = ReadFile(dir_ + "/evil.tar");
  ASSERT_TRUE(evil.ok());
  Got bad = Call("PUT", "/api/v1/namespaces/ada/packages/" + Sha256Hex(*evil), *evil, token_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body["error"]["message"].get<std::string>().find("absolute path"), std::string::npos)
      << bad.body;
  // A sparse member: a few bytes in the archive, 2 GiB once written.
  ASSERT_EQ(std::system(("truncate -s 2G " + src + "/holes.bin && tar -C " + src + " -S -cf " + dir_ +
                         "/sparse.tar holes.bin")
                            .c_str()),
            0);
  auto sparse = ReadFile(dir_ + "/sparse.tar");
  ASSERT_TRUE(sparse.ok());
  ASSERT_LT(sparse->size(), 1u << 20);
  Got holes = Call("PUT", "/api/v1/namespaces/ada/packages/" + Sha256Hex(*sparse), *sparse, token_);
  EXPECT_EQ(holes.status, 400) << holes.body;
  EXPECT_NE(holes.body["error"]["message"].get<std::string>().find("sparse file"), std::string::npos)
      << holes.body;
  Got wrong = Call("PUT", "/api/v1/namespaces/ada/packages/" + Sha256Hex("other"), *evil, token_);
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/server/packages"));
  // Another user sees none of ada's jobs and cannot submit into her namespace.
  const std::string bob = SignUpAndLogin("bob", "battery staple");
  EXPECT_EQ(Call("POST", "/api/v1/namespaces/ada/jobs", Json{{"model", "mlp"}, {"dataset", "fm"}}.dump(), bob)
                .status,
            404);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/jobs", "", bob).status, 404);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsApiTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
