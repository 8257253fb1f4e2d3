// The Kubernetes backend through a real `tessera server`. No Kubernetes API server can run here,
// so `kubectl` is a script standing in for the cluster: it records every call, keeps what is
// applied, and answers `get` with the pods and the trainer Job this test writes. Shown: a
// submitted job applied into its namespace's Kubernetes namespace (every object owned by its
// ConfigMap, every manifest valid against the Kubernetes schemas), running once its master pod is
// ready, its metrics read from the run history the master writes on the shared volume, scaled
// by patching the trainers' parallelism, its pods' logs kept, succeeded once the trainer Job is
// complete, then deleted from the cluster; a job whose image cannot be pulled fails with why.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "harness/wait.h"
#include "server/api_fixture.h"

namespace tessera::server {
namespace {

class K8sBackendTest : public ApiFixture {
 protected:
  void SetUp() override {
    ApiFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    state_ = dir_ + "/cluster";
    std::filesystem::create_directories(state_ + "/applied");
    kubectl_ = dir_ + "/kubectl";
    std::ofstream(kubectl_)
        << "#!/bin/sh\n"
           "S="
        << state_
        << "\n"
           "echo \"$*\" >> $S/calls.log\n"
           "case \"$1\" in\n"
           // Each file copied whole, then renamed in: the test reads a file as soon as it exists.
           "  apply) for f in \"$3\" \"$3\"/*.yaml; do [ -f \"$f\" ] || continue\n"
           "           cp \"$f\" $S/.part && mv $S/.part $S/applied/$(basename \"$f\"); done\n"
           "         [ -d \"$3\" ] && echo '{\"metadata\":{\"name\":\"t\"},\"status\":{}}' > $S/job.json\n"
           "         echo applied ;;\n"
           "  get) case \"$2\" in\n"
           "         configmap) echo uid-1234 ;;\n"
           "         pods) cat $S/pods.json 2>/dev/null || echo '{\"items\":[]}' ;;\n"
           "         job) cat $S/job.json 2>/dev/null ;;\n"
           "       esac ;;\n"
           "  logs) echo \"the log of pod $4\" ;;\n"
           "  patch) echo patched ;;\n"
           "  delete) rm -f $S/job.json; echo deleted ;;\n"
           "esac\n";
    ::chmod(kubectl_.c_str(), 0755);
    server_->Terminate(std::chrono::seconds(10));
    StartServer({"--backend", "kubernetes", "--kubectl", kubectl_, "--k8s-data-claim", "tessera-data",
                 "--k8s-namespace-prefix", "team-"});
    token_ = SignUpAndLogin("ada", "correct horse");
    UploadFashionTest(token_);
  }
  void Pods(const std::string& job, const std::string& master_state, bool ready) {
    Json pod = {{"metadata", {{"name", job + "-master-abc"}, {"labels", {{"tessera.io/role", "master"}}}}},
                {"status",
                 {{"phase", "Running"},
                  {"conditions", Json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
    if (!master_state.empty())
      pod["status"]["containerStatuses"] =
          Json::array({{{"state", {{"waiting", {{"reason", master_state}, {"message", "no such image"}}}}}}});
    Json trainer = {
        {"metadata", {{"name", job + "-trainer-xyz"}, {"labels", {{"tessera.io/role", "trainer"}}}}},
        {"status", {{"phase", "Running"}}}};
    ASSERT_TRUE(WriteFileAtomic(state_ + "/pods.json", Json{{"items", {pod, trainer}}}.dump()).ok());
  }
  Json Job(const std::string& id) { return Call("GET", "/api/v1/jobs/" + id, "", token_).body; }
  bool WaitState(const std::string& id, const std::string& state) {
    return testing::WaitUntil([&] { return Job(id).value("state", "") == state; }, std::chrono::seconds(60),
                              std::chrono::milliseconds(200));
  }
  std::string Calls() {
    auto text = ReadFile(state_ + "/calls.log");
    return text.ok() ? *text : "";
  }
  std::string state_, kubectl_, token_;
};

TEST_P(K8sBackendTest, AJobIsAppliedWatchedScaledAndCleanedUp) {
  Got sub = Call("POST", "/api/v1/namespaces/ada/jobs",
                 R"({"model": "mlp", "dataset": "fm", "passes": 3, "trainers": 2, "pservers": 2})", token_);
  ASSERT_EQ(sub.status, 201) << sub.body;
  const std::string id = sub.body["id"];
  ASSERT_TRUE(WaitState(id, "starting")) << Job(id).dump(1);
  EXPECT_EQ(Job(id)["backend"], "kubernetes");
  // Applied: the ConfigMap first, then the rest owned by it, in the namespace's own.
  // (the stand-in writes job.json once every file of the directory is in)
  ASSERT_TRUE(testing::WaitUntil([&] { return std::filesystem::exists(state_ + "/job.json"); },
                                 std::chrono::seconds(30)));
  const std::string calls = Calls();
  EXPECT_NE(calls.find("apply -f"), std::string::npos) << calls;
  EXPECT_NE(calls.find("get configmap " + id + " -n team-ada"), std::string::npos) << calls;
  auto trainer = ReadFile(state_ + "/applied/40-trainer-job.yaml");
  ASSERT_TRUE(trainer.ok());
  EXPECT_NE(trainer->find("namespace: \"team-ada\""), std::string::npos) << *trainer;
  EXPECT_NE(trainer->find("uid: \"uid-1234\""), std::string::npos) << "owned by the ConfigMap: " << *trainer;
  EXPECT_NE(trainer->find("subPath: \"datasets/ada\""), std::string::npos) << *trainer;
  EXPECT_NE(trainer->find("parallelism: 2"), std::string::npos) << *trainer;
  // Every manifest valid against the Kubernetes schemas.
  testing::SpawnOptions v;
  v.argv = {"/usr/bin/env", "node", testing::BuildPath("deploy-npm/validate.mjs"), state_ + "/applied"};
  v.log_path = dir_ + "/validate.log";
  auto check = testing::Subprocess::Spawn(v);
  ASSERT_TRUE(check.ok());
  EXPECT_EQ((*check)->Wait(std::chrono::seconds(120)), 0) << (*check)->Output();

  // The master's pod ready: running. The history the master writes on the shared volume is read.
  Pods(id, "", true);
  ASSERT_TRUE(WaitState(id, "running")) << Job(id).dump(1);
  const std::string history = dir_ + "/server/jobs/" + id + "/run/history.jsonl";
  ASSERT_TRUE(WriteFileAtomic(history,
                              R"({"type":"cost","seq":1,"pass":1,"step":1,"cost":2.3,"trainer":"0"})"
                              "\n"
                              R"({"type":"eval","seq":2,"pass":1,"step":9,"metric":"accuracy","value":0.8})"
                              "\n")
                  .ok());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Call("GET", "/api/v1/jobs/" + id + "/metrics", "", token_).body["points"].size() == 2; },
      std::chrono::seconds(30)));
  // Scaled: the trainers' parallelism is patched.
  EXPECT_EQ(Call("POST", "/api/v1/jobs/" + id + "/scale", R"({"trainers": 1})", token_).status, 202);
  EXPECT_NE(
      Calls().find("patch job " + id + "-trainer -n team-ada --type=merge -p {\"spec\":{\"parallelism\":1}}"),
      std::string::npos)
      << Calls();
  // The trainer Job completes: succeeded, the pods' logs kept, the job deleted from the cluster.
  ASSERT_TRUE(
      WriteFileAtomic(
          state_ + "/job.json",
          R"({"metadata":{"name":"t"},"status":{"conditions":[{"type":"Complete","status":"True"}]}})")
          .ok());
  ASSERT_TRUE(WaitState(id, "succeeded")) << Job(id).dump(1);
  EXPECT_NE(Calls().find("delete configmap " + id + " -n team-ada"), std::string::npos) << Calls();
  Got logs = Call("GET", "/api/v1/jobs/" + id + "/logs/master-0?tail=5", "", token_);
  EXPECT_EQ(logs.status, 200) << logs.body;
  EXPECT_NE(logs.body.value("text", "").find("the log of pod " + id + "-master-abc"), std::string::npos)
      << logs.body;
  // After a restart, the logs and metrics are still there.
  server_->Kill();
  StartServer({"--backend", "kubernetes", "--kubectl", kubectl_, "--k8s-data-claim", "tessera-data"});
  EXPECT_EQ(Call("GET", "/api/v1/jobs/" + id + "/metrics", "", token_).body["points"].size(), 2u);
  EXPECT_EQ(Call("GET", "/api/v1/jobs/" + id + "/logs/trainer-0?tail=5", "", token_).status, 200);
}

TEST_P(K8sBackendTest, APodThatCannotStartFailsTheJobWithWhy) {
  Got sub = Call("POST", "/api/v1/namespaces/ada/jobs", R"({"model": "mlp", "dataset": "fm"})", token_);
  ASSERT_EQ(sub.status, 201) << sub.body;
  const std::string id = sub.body["id"];
  ASSERT_TRUE(WaitState(id, "starting"));
  Pods(id, "ImagePullBackOff", false);
  ASSERT_TRUE(WaitState(id, "failed")) << Job(id).dump(1);
  EXPECT_NE(Job(id).value("reason", "").find("cannot start: ImagePullBackOff: no such image"),
            std::string::npos)
      << Job(id)["reason"];
  EXPECT_NE(Calls().find("delete configmap " + id), std::string::npos) << "what was left is removed";
}

TEST_P(K8sBackendTest, WithoutTheDataClaimTheServerRefusesToStart) {
  server_->Terminate(std::chrono::seconds(10));
  testing::SpawnOptions o;
  o.argv = {testing::BuildPath("src/tessera"),
            "server",
            "--port",
            "0",
            "--data-dir",
            dir_ + "/other",
            "--backend",
            "kubernetes"};
  o.log_path = dir_ + "/noclaim.log";
  auto p = testing::Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait(std::chrono::seconds(30)), 1);
  EXPECT_NE((*p)->Output().find("needs --k8s-data-claim"), std::string::npos) << (*p)->Output();
}

INSTANTIATE_TEST_SUITE_P(Backends, K8sBackendTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
