// The Kubernetes backend's pure parts: a job's state from kubectl's JSON (pods being created,
// a ready master, a pod that can never start, the trainers' Job complete or failed, the Job
// gone), log names of pods, and the job spec a launch becomes (namespace, sub-paths, resources).
#include "server_backends/k8s_observe.h"

#include <gtest/gtest.h>

#include "deploy/k8s_manifests.h"
#include "server_backends/k8s_backend.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

Json Pod(const std::string& name, const std::string& role, const std::string& phase, bool ready,
         const Json& state = Json::object()) {
  Json p = {
      {"metadata", {{"name", name}, {"labels", {{"tessera.io/job", "ada-1"}, {"tessera.io/role", role}}}}},
      {"status",
       {{"phase", phase},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
  if (!state.empty()) p["status"]["containerStatuses"] = Json::array({{{"name", role}, {"state", state}}});
  return p;
}

Json TrainerJob(const std::string& condition = "") {
  Json j = {{"metadata", {{"name", "ada-1-trainer"}}}, {"status", Json::object()}};
  if (!condition.empty())
    j["status"]["conditions"] = Json::array(
        {{{"type", condition}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}, {"message", "x"}}});
  return j;
}

TEST(K8sObserve, AJobBeingCreatedIsAliveAndNotReady) {
  JobObservation o = ObserveKubernetesJob(Json{{"items", Json::array()}}, TrainerJob());
  EXPECT_TRUE(o.alive) << "no pod yet, but its Job exists";
  EXPECT_FALSE(o.ready);
  o = ObserveKubernetesJob(
      Json{{"items", Json::array({Pod("ada-1-master-x", "master", "Pending", false,
                                      {{"waiting", {{"reason", "ContainerCreating"}}}})})}},
      TrainerJob());
  EXPECT_TRUE(o.alive);
  EXPECT_FALSE(o.ready);
  EXPECT_TRUE(o.why_ended.empty());
}

TEST(K8sObserve, AReadyMasterMakesItRunning) {
  Json pods = {{"items", Json::array({Pod("ada-1-master-b", "master", "Running", false),
                                      Pod("ada-1-master-a", "master", "Running", true),
                                      Pod("ada-1-pserver-0", "pserver", "Running", true)})}};
  JobObservation o = ObserveKubernetesJob(pods, TrainerJob());
  EXPECT_TRUE(o.alive);
  EXPECT_TRUE(o.ready) << "the leader is the ready one";
}

TEST(K8sObserve, CompleteFailedGoneAndHopelessPodsEndIt) {
  Json pods = {{"items", Json::array({Pod("ada-1-master-a", "master", "Running", true)})}};
  JobObservation done = ObserveKubernetesJob(pods, TrainerJob("Complete"));
  EXPECT_TRUE(done.completed);
  EXPECT_FALSE(done.alive);
  JobObservation failed = ObserveKubernetesJob(pods, TrainerJob("Failed"));
  EXPECT_FALSE(failed.alive);
  EXPECT_FALSE(failed.completed);
  EXPECT_NE(failed.why_ended.find("BackoffLimitExceeded"), std::string::npos) << failed.why_ended;
  JobObservation gone = ObserveKubernetesJob(pods, Json());
  EXPECT_FALSE(gone.alive) << "its Job was deleted (stopped)";
  Json bad = {{"items", Json::array({Pod(
                            "ada-1-trainer-q", "trainer", "Pending", false,
                            {{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "no tessera:9"}}}})})}};
  JobObservation never = ObserveKubernetesJob(bad, TrainerJob());
  EXPECT_FALSE(never.alive);
  EXPECT_NE(never.why_ended.find("ada-1-trainer-q cannot start: ImagePullBackOff: no tessera:9"),
            std::string::npos)
      << never.why_ended;
  // A crash that Kubernetes restarts is not the end.
  Json crash = {{"items", Json::array({Pod("ada-1-trainer-q", "trainer", "Running", false,
                                           {{"waiting", {{"reason", "CrashLoopBackOff"}}}})})}};
  EXPECT_TRUE(ObserveKubernetesJob(crash, TrainerJob()).alive);
  // Not JSON of pods at all: nothing to see, nothing crashes.
  EXPECT_TRUE(ParsePods(Json::array()).empty());
  EXPECT_TRUE(ParsePods(Json{{"items", 3}}).empty());
}

TEST(K8sObserve, LogNamesNumberPodsWithinTheirRole) {
  auto views = ParsePods(Json{{"items", Json::array({Pod("j-trainer-zz", "trainer", "Running", true),
                                                     Pod("j-trainer-aa", "trainer", "Running", true),
                                                     Pod("j-master-q", "master", "Running", true),
                                                     Pod("j-pserver-0", "pserver", "Running", true)})}});
  auto names = LogNames(views);
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0], (std::pair<std::string, std::string>{"master-0", "j-master-q"}));
  EXPECT_EQ(names[1], (std::pair<std::string, std::string>{"pserver-0", "j-pserver-0"}));
  EXPECT_EQ(names[2], (std::pair<std::string, std::string>{"trainer-0", "j-trainer-aa"}));
  EXPECT_EQ(names[3], (std::pair<std::string, std::string>{"trainer-1", "j-trainer-zz"}));
}

TEST(K8sBackendSpec, ALaunchBecomesAJobInItsNamespaceOnTheDataVolume) {
  K8sOptions o;
  o.data_claim = "tessera-data";
  o.data_dir = "/srv/tessera";
  o.namespace_prefix = "team-";
  o.image = "registry.example/tessera:1";
  JobLaunch l;
  l.id = "ada-1f2e3d4c";
  l.ns = "ada";
  l.dir = "/srv/tessera/jobs/ada-1f2e3d4c";
  l.store = "/srv/tessera/datasets/bob";  // a data set bob shared
  l.job.dataset = "fm";
  l.code_dir = l.dir + "/code";
  l.job.command = spec::ShellCommand("python3 train.py --epochs 2");
  l.job.pservers = 2;
  l.trainers = 3;
  l.cpu = 1.5;
  l.memory_mb = 2048;
  l.gpus = 1;
  auto s = KubernetesBackend::SpecFor(o, l);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->namespace_, "team-ada");
  EXPECT_EQ(s->name, "ada-1f2e3d4c");
  EXPECT_EQ(s->store.sub_path, "datasets/bob");
  EXPECT_EQ(s->checkpoints.sub_path, "jobs/ada-1f2e3d4c/run");
  EXPECT_EQ(s->code.sub_path, "jobs/ada-1f2e3d4c/code");
  EXPECT_EQ(s->command, (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py --epochs 2"}));
  EXPECT_EQ(s->resources["trainer"].cpu, "1500m");
  EXPECT_EQ(s->resources["trainer"].memory, "2048Mi");
  EXPECT_EQ(s->resources["trainer"].gpus, 1);
  EXPECT_EQ(s->resources["pserver"].gpus, 0);
  auto m = deploy::RenderJob(*s, "{}");
  ASSERT_TRUE(m.ok()) << m.status();
  bool trainer_seen = false, master_seen = false;
  for (const auto& x : *m) {
    EXPECT_EQ(x.object["metadata"]["namespace"], "team-ada") << x.file;
    const auto& o2 = x.object;
    if (o2["kind"] == "Job") {
      trainer_seen = true;
      const auto& c = o2["spec"]["template"]["spec"]["containers"][0];
      EXPECT_EQ(c["workingDir"], "/tessera/code");
      EXPECT_EQ(c["image"], "registry.example/tessera:1");
      EXPECT_EQ(o2["spec"]["parallelism"], 3);
      bool code = false;
      for (const auto& v : c["volumeMounts"])
        code = code || (v["name"] == "code" && v["subPath"] == "jobs/ada-1f2e3d4c/code");
      EXPECT_TRUE(code) << c["volumeMounts"].dump();
    }
    if (o2["kind"] == "Deployment") {
      master_seen = true;
      const std::string args = o2["spec"]["template"]["spec"]["containers"][0]["args"].dump();
      EXPECT_NE(args.find("\"--history-file\",\"/tessera/run/history.jsonl\""), std::string::npos) << args;
    }
  }
  EXPECT_TRUE(trainer_seen && master_seen);
  // Outside the data directory, or without a claim: refused with what to do.
  l.store = "/elsewhere/datasets/ada";
  auto outside = KubernetesBackend::SpecFor(o, l);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("not inside the data directory"), std::string::npos);
  o.data_claim.clear();
  EXPECT_FALSE(KubernetesBackend::SpecFor(o, l).ok());
}

}  // namespace
}  // namespace tessera::server
