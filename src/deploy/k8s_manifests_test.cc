// The Kubernetes objects of a job: which exist, and the facts the launch depends on.
#include "deploy/k8s_manifests.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace tessera::deploy {
namespace {

using Json = nlohmann::ordered_json;

JobSpec Spec() {
  auto s = spec::ParseJobSpec(R"(
name: fm
namespace: ml
pservers: 3
trainers: {min: 2, max: 5}
resources: {trainer: {cpu: "2", gpu: 1}}
train: {dataset: fm, model: mlp, passes: 2, checkpoint_every: 10}
store: {path: /data/store, claim: store}
checkpoints: {path: /data/ckpt, claim: ckpt}
)",
                              "t.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

std::map<std::string, Json> ByKindName(const std::vector<Manifest>& m) {
  std::map<std::string, Json> out;
  for (const auto& x : m)
    out[x.object["kind"].get<std::string>() + "/" + x.object["metadata"]["name"].get<std::string>()] =
        x.object;
  return out;
}

// A --tls job: the Secret is mounted, owner-readable only, in every tessera container (the init
// container that creates the job too), never in etcd's; TESSERA_TLS_* point at it; the job is
// created with --tls. Without a Secret, rendering says how to make one.
TEST(K8sManifestsTest, ATlsJobMountsItsCertificatesInEveryTesseraPod) {
  JobSpec s = Spec();
  s.tls_dir = "/etc/tessera/tls";
  auto missing = RenderJob(s, "spec");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("kubectl -n ml create secret generic fm-tls"), std::string::npos)
      << missing.status();
  s.tls_secret = "fm-tls";
  auto m = RenderJob(s, "spec");
  ASSERT_TRUE(m.ok()) << m.status();
  auto o = ByKindName(*m);
  int containers = 0;
  for (const char* k : {"Deployment/fm-master", "StatefulSet/fm-pserver", "Job/fm-trainer"}) {
    const Json& pod = o[k]["spec"]["template"]["spec"];
    bool volume = false;
    for (const auto& v : pod["volumes"])
      volume |=
          v["name"] == "tls" && v["secret"]["secretName"] == "fm-tls" && v["secret"]["defaultMode"] == 0400;
    EXPECT_TRUE(volume) << k << ": " << pod.dump();
    for (const char* list : {"initContainers", "containers"}) {
      if (!pod.contains(list)) continue;
      for (const auto& c : pod[list]) {
        ++containers;
        bool mounted = false;
        for (const auto& mnt : c["volumeMounts"])
          mounted |=
              mnt["name"] == "tls" && mnt["mountPath"] == "/etc/tessera/tls" && mnt["readOnly"] == true;
        EXPECT_TRUE(mounted) << k << " " << c["name"];
        std::map<std::string, std::string> env;
        for (const auto& e : c["env"])
          if (e.contains("value")) env[e["name"]] = e["value"];
        EXPECT_EQ(env["TESSERA_TLS_KEY"], "/etc/tessera/tls/node.key") << k << " " << c["name"];
      }
    }
  }
  EXPECT_EQ(containers, 4) << "job-create, master, pserver, trainer";
  EXPECT_FALSE(o["StatefulSet/fm-etcd"]["spec"]["template"]["spec"].dump().find("tls") != std::string::npos);
  const Json& init = o["Deployment/fm-master"]["spec"]["template"]["spec"]["initContainers"][0];
  EXPECT_EQ(init["args"].back(), "--tls");
}

TEST(K8sManifestsTest, AnElasticJobStartsItsFirstPserversAndGivesThemTimeToHandTheirShardsOver) {
  JobSpec s = Spec();
  auto fixed = ByKindName(*RenderJob(s, "spec"));
  EXPECT_EQ(fixed["StatefulSet/fm-pserver"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 30);
  EXPECT_FALSE(fixed["StatefulSet/fm-pserver"]["metadata"].contains("annotations"));
  s.start_pservers = 1;
  auto m = RenderJob(s, "spec");
  ASSERT_TRUE(m.ok()) << m.status();
  auto o = ByKindName(*m);
  const Json& set = o["StatefulSet/fm-pserver"];
  EXPECT_EQ(set["spec"]["replicas"], 1);
  EXPECT_EQ(set["metadata"]["annotations"]["tessera.io/max-pservers"], "3");
  EXPECT_EQ(set["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 90);
  auto args = s.JobCreateArgs();
  auto at = std::find(args.begin(), args.end(), "--start-pservers");
  ASSERT_NE(at, args.end());
  EXPECT_EQ(*(at + 1), "1");
}

// Consistent checkpoints alone (checkpoint_steps, no timed ones) still mount the pservers'
// checkpoint volume and name it on their command line.
TEST(K8sManifestsTest, ConsistentCheckpointsAloneMountTheCheckpointVolume) {
  JobSpec s = Spec();
  s.checkpoint_every = 0;
  s.checkpoint_steps = 50;
  auto m = RenderJob(s, "spec");
  ASSERT_TRUE(m.ok()) << m.status();
  auto objects = ByKindName(*m);
  const Json& pod = objects["StatefulSet/fm-pserver"]["spec"]["template"]["spec"];
  const std::string text = pod.dump();
  EXPECT_NE(text.find("\"mountPath\":\"/data/ckpt\""), std::string::npos) << text;
  EXPECT_NE(text.find("--checkpoint-dir"), std::string::npos) << text;
  EXPECT_EQ(text.find("--checkpoint-every"), std::string::npos) << text;
  auto args = s.JobCreateArgs();
  EXPECT_NE(std::find(args.begin(), args.end(), "--checkpoint-steps"), args.end());
}

TEST(K8sManifestsTest, EveryObjectOfAJobWithItsOwnEtcd) {
  auto m = RenderJob(Spec(), "spec");
  ASSERT_TRUE(m.ok()) << m.status();
  auto o = ByKindName(*m);
  for (const char* k :
       {"ConfigMap/fm", "ServiceAccount/fm", "Service/fm-etcd", "StatefulSet/fm-etcd", "Deployment/fm-master",
        "Service/fm-console", "Service/fm-pserver", "StatefulSet/fm-pserver", "Job/fm-trainer",
        "NetworkPolicy/fm", "NetworkPolicy/fm-console"})
    EXPECT_TRUE(o.count(k)) << k;
  for (const auto& x : *m) {
    EXPECT_EQ(x.object["metadata"]["namespace"], "ml") << x.file;
    EXPECT_EQ(x.object["metadata"]["labels"]["tessera.io/job"], "fm") << x.file;
  }
  EXPECT_EQ(o["StatefulSet/fm-pserver"]["spec"]["replicas"], 3);
  EXPECT_EQ(o["Job/fm-trainer"]["spec"]["parallelism"], 2);
  EXPECT_EQ(o["Job/fm-trainer"]["metadata"]["annotations"]["tessera.io/max-trainers"], "5");
  const Json& trainer = o["Job/fm-trainer"]["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(trainer["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(trainer["resources"]["requests"]["cpu"], "2");
  // The master's Service reaches the leader only: it alone is ready.
  const Json& master = o["Deployment/fm-master"]["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(master["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(o["Deployment/fm-master"]["spec"]["template"]["spec"]["initContainers"][0]["args"][1], "create");
  // Nodes advertise the pod's address.
  bool pod_ip = false;
  for (const auto& e : master["env"])
    pod_ip |= e["name"] == "POD_IP" && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP";
  EXPECT_TRUE(pod_ip);
  // Scraped by Prometheus.
  EXPECT_EQ(
      o["StatefulSet/fm-pserver"]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"],
      "true");
}

// A trainer's math libraries get the whole cores of its CPU request (at least one); without a
// request, nothing is set.
// docs/security.md, "Kubernetes": every pod as an unprivileged user with the runtime's default
// seccomp profile, every container read-only with no capability; no API token; only the job's
// own pods reach its pods.
TEST(K8sManifestsTest, EveryPodRunsUnprivilegedAndOnlyTheJobsOwnPodsReachIt) {
  auto m = RenderJob(Spec(), "name: fm\n");
  ASSERT_TRUE(m.ok()) << m.status();
  int pods = 0;
  for (const auto& x : *m) {
    const Json& o = x.object;
    if (!o.contains("spec") || !o["spec"].contains("template")) continue;
    ++pods;
    const Json& pod = o["spec"]["template"]["spec"];
    const std::string what = o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>();
    EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true) << what;
    EXPECT_NE(pod["securityContext"]["runAsUser"], 0) << what;
    EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault") << what;
    EXPECT_EQ(pod["automountServiceAccountToken"], false) << what;
    for (const char* list : {"initContainers", "containers"}) {
      if (!pod.contains(list)) continue;
      for (const auto& c : pod[list]) {
        EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true) << what << " " << c["name"];
        EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false) << what << " " << c["name"];
        EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], Json::array({"ALL"}))
            << what << " " << c["name"];
        bool tmp = false;
        for (const auto& v : c["volumeMounts"]) tmp = tmp || v["mountPath"] == "/tmp";
        EXPECT_TRUE(tmp) << what << " " << c["name"] << ": nowhere to write";
      }
    }
  }
  EXPECT_EQ(pods, 4) << "etcd, master, pservers, trainers";
  const auto objects = ByKindName(*m);
  ASSERT_TRUE(objects.count("ServiceAccount/fm"));
  EXPECT_EQ(objects.at("ServiceAccount/fm")["automountServiceAccountToken"], false);
  for (const auto& [name, o] : objects)
    EXPECT_NE(o["kind"], "RoleBinding") << "the job's account may do nothing";
  const Json& policy = objects.at("NetworkPolicy/fm");
  EXPECT_EQ(policy["spec"]["podSelector"]["matchLabels"]["tessera.io/job"], "fm");
  ASSERT_EQ(policy["spec"]["ingress"].size(), 1u);
  EXPECT_EQ(policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["tessera.io/job"], "fm")
      << "another job's pods (another namespace's) may reach this one";
}

TEST(K8sManifestsTest, ATrainersMathThreadsFollowItsCpuRequest) {
  auto threads = [](const std::string& cpu) {
    JobSpec s = Spec();
    if (cpu.empty()) {
      s.resources.erase("trainer");
    } else {
      s.resources["trainer"].cpu = cpu;
    }
    auto m = RenderJob(s, "spec");
    EXPECT_TRUE(m.ok()) << m.status();
    std::map<std::string, std::string> env;
    auto objects = ByKindName(*m);
    for (const auto& e : objects["Job/fm-trainer"]["spec"]["template"]["spec"]["containers"][0]["env"]) {
      if (e.contains("value")) env[e["name"].get<std::string>()] = e["value"].get<std::string>();
    }
    const std::string omp = env.count("OMP_NUM_THREADS") ? env["OMP_NUM_THREADS"] : "unset";
    EXPECT_EQ(omp, env.count("OPENBLAS_NUM_THREADS") ? env["OPENBLAS_NUM_THREADS"] : "unset") << cpu;
    EXPECT_EQ(omp, env.count("MKL_NUM_THREADS") ? env["MKL_NUM_THREADS"] : "unset") << cpu;
    return omp;
  };
  EXPECT_EQ(threads("2"), "2");
  EXPECT_EQ(threads("3.5"), "3");
  EXPECT_EQ(threads("4000m"), "4");
  EXPECT_EQ(threads("500m"), "1");
  EXPECT_EQ(threads(""), "unset");
}

// Busy polling is on in the pods of a role that requests a whole core or more, off elsewhere
// (the variable absent: trainers and pservers then sleep at once).
TEST(K8sManifestsTest, PodsWithAWholeCorePollForTheirMessages) {
  auto polling = [](const std::string& role, const std::string& cpu) {
    JobSpec s = Spec();
    s.resources.erase("trainer");
    if (!cpu.empty()) s.resources[role].cpu = cpu;
    auto m = RenderJob(s, "spec");
    EXPECT_TRUE(m.ok()) << m.status();
    auto objects = ByKindName(*m);
    std::map<std::string, std::string> out;
    for (const char* name : {"Job/fm-trainer", "StatefulSet/fm-pserver", "Deployment/fm-master"}) {
      std::string value = "unset";
      for (const auto& e : objects[name]["spec"]["template"]["spec"]["containers"][0]["env"]) {
        if (e["name"] == "TESSERA_BUSY_POLL_US") value = e["value"].get<std::string>();
      }
      out[name] = value;
    }
    return out;
  };
  auto t = polling("trainer", "2");
  EXPECT_EQ(t["Job/fm-trainer"], "1000");
  EXPECT_EQ(t["StatefulSet/fm-pserver"], "unset");
  EXPECT_EQ(t["Deployment/fm-master"], "unset");
  auto p = polling("pserver", "1");
  EXPECT_EQ(p["StatefulSet/fm-pserver"], "1000");
  EXPECT_EQ(p["Job/fm-trainer"], "unset");
  EXPECT_EQ(polling("pserver", "1000m")["StatefulSet/fm-pserver"], "1000");
  EXPECT_EQ(polling("pserver", "999m")["StatefulSet/fm-pserver"], "unset");
  EXPECT_EQ(polling("trainer", "500m")["Job/fm-trainer"], "unset");
  auto none = polling("trainer", "");
  EXPECT_EQ(none["Job/fm-trainer"], "unset");
  EXPECT_EQ(none["StatefulSet/fm-pserver"], "unset");
}

TEST(K8sManifestsTest, ExternalEtcdRendersNoEtcdAndPointsEveryProcessThere) {
  JobSpec s = Spec();
  s.etcd_endpoints = {"etcd.infra:2379"};
  auto m = RenderJob(s, "spec");
  ASSERT_TRUE(m.ok());
  auto o = ByKindName(*m);
  EXPECT_FALSE(o.count("StatefulSet/fm-etcd"));
  EXPECT_FALSE(o.count("Service/fm-etcd"));
  for (const auto& e : o["StatefulSet/fm-pserver"]["spec"]["template"]["spec"]["containers"][0]["env"])
    if (e["name"] == "TESSERA_ETCD") {
      EXPECT_EQ(e["value"], "etcd.infra:2379");
    }
}

TEST(K8sManifestsTest, AVolumeWithNeitherClaimNorNfsCannotRunOnKubernetes) {
  JobSpec s = Spec();
  s.store.claim.clear();
  auto m = RenderJob(s, "spec");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("store"), std::string::npos) << m.status();
}

TEST(K8sManifestsTest, NamespaceTemplateQuotasGpus) {
  auto m = RenderNamespaceTemplate(Spec());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].object["kind"], "ResourceQuota");
  EXPECT_EQ(m[1].object["spec"]["hard"]["requests.nvidia.com/gpu"], "5");  // 5 trainers at most, 1 GPU each
  EXPECT_EQ(m[2].object["kind"], "LimitRange");
}

}  // namespace
}  // namespace tessera::deploy
