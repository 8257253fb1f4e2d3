// The rendered Kubernetes manifests, run: `tessera deploy k8s` renders a job, and this test starts
// every pod the objects describe as processes, each pod in a network namespace of its own, with
// the Services' DNS names in its /etc/hosts, the downward API's POD_IP and POD_NAME in its
// environment, $(VAR) references expanded as the kubelet does, init containers run to completion
// before their pod's container, and each container's command, args and environment exactly as
// rendered. Only what needs a cluster is stood in for: the image is this build (`tessera` is the
// built binary), a volume claim is a directory, and pods start in dependency order (etcd, master,
// pservers, trainers) since no kubelet restarts them; the job's TLS Secret is the directory
// `tessera certs` wrote, at the mount path. The job must train to completion, over mutual TLS
// between its pods: proof that the commands, flags, ports, names and environment in the manifests
// are right.
// Needs root for the namespaces; skipped with a message otherwise.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <optional>
#include <regex>
#include <thread>

#include "common/files.h"
#include "data/data_fixture.h"
#include "harness/netns.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

struct Container {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
};

struct Pod {
  std::string name, role, host;
  std::map<std::string, std::string> labels;
  std::vector<Container> init, main;
};

// $(VAR) expanded from `env`, as the kubelet does for command, args and env values.
std::string Expand(const std::string& s, const std::map<std::string, std::string>& env) {
  static const std::regex ref("\\$\\(([A-Za-z_][A-Za-z0-9_]*)\\)");
  std::string out;
  auto begin = std::sregex_iterator(s.begin(), s.end(), ref);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out += s.substr(last, it->position() - last);
    auto v = env.find((*it)[1]);
    out += v == env.end() ? it->str() : v->second;
    last = it->position() + it->length();
  }
  return out + s.substr(last);
}

Container ReadContainer(const YAML::Node& c, const Pod& pod, const std::string& ip,
                        const std::map<std::string, std::string>& mounts) {
  Container out;
  for (const auto& e : c["env"]) {
    std::string name = e["name"].as<std::string>();
    if (e["valueFrom"]) {
      std::string path = e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>();
      out.env[name] = path == "status.podIP" ? ip : path == "metadata.name" ? pod.name : "?";
    } else {
      out.env[name] = Expand(e["value"].as<std::string>(), out.env);
    }
  }
  auto add = [&](const YAML::Node& list) {
    for (const auto& a : list) {
      std::string arg = Expand(a.as<std::string>(), out.env);
      for (const auto& [from, to] : mounts)  // a claim template's mount path: this pod's directory
        if (arg.find(from) != std::string::npos) arg.replace(arg.find(from), from.size(), to);
      out.argv.push_back(arg);
    }
  };
  add(c["command"]);
  add(c["args"]);
  if (!out.argv.empty() && out.argv[0] == "tessera") out.argv[0] = BuildPath("src/tessera");
  return out;
}

class K8sPodsTest : public TempDirTest {};

TEST_F(K8sPodsTest, RenderedManifestsRunAsPodsTrainAJobToCompletion) {
  NetLab lab;
  std::string why;
  if (!lab.Open(&why)) GTEST_SKIP() << "network namespaces cannot be created here (needs root): " << why;

  const std::string store = dir_ + "/store";
  ASSERT_TRUE(UploadFashionMnist(store));
  const std::string spec = dir_ + "/job.yaml", tls = dir_ + "/tls";
  // The Secret's contents, as docs/deploy.md makes them; the "mount" is the directory itself.
  auto certs = Tessera({"certs", "--job", "kt", "--out", tls, "--node", "node"});
  ASSERT_EQ(certs.code, 0) << certs.out;
  ASSERT_TRUE(
      WriteFileAtomic(spec,
                      "name: kt\nmasters: 2\npservers: 2\ntrainers: 2\n"
                      "train: {dataset: fm, eval_dataset: fm-test, model: mlp, model_args: [hidden=32],\n"
                      "        passes: 2, checkpoint_every: 1, lease_ttl: 3}\n"
                      "store: {path: " +
                          store +
                          ", claim: store}\n"
                          "checkpoints: {path: " +
                          dir_ +
                          "/checkpoints, claim: checkpoints}\n"
                          "tls: {secret: kt-tls, path: " +
                          tls + "}\n")
          .ok());
  auto rendered = Tessera({"deploy", "k8s", "--spec", spec, "--out", dir_ + "/k8s"});
  ASSERT_EQ(rendered.code, 0) << rendered.out;

  // The pods the workloads describe, each on a host of its own; the names the Services give them.
  std::vector<YAML::Node> objects;
  for (const auto& e : fs::directory_iterator(dir_ + "/k8s"))
    if (e.is_regular_file()) objects.push_back(YAML::LoadFile(e.path().string()));
  std::vector<Pod> pods;
  std::map<std::string, std::string> names;  // DNS name -> address
  std::vector<YAML::Node> templates;
  int next_host = 1;
  for (const auto& o : objects) {
    std::string kind = o["kind"].as<std::string>(), name = o["metadata"]["name"].as<std::string>();
    if (kind != "StatefulSet" && kind != "Deployment" && kind != "Job") continue;
    int n = kind == "Job" ? o["spec"]["parallelism"].as<int>() : o["spec"]["replicas"].as<int>();
    for (int i = 0; i < n; ++i) {
      Pod p;
      p.name = name + "-" + std::to_string(i);
      p.host = "p" + std::to_string(next_host);
      for (const auto& l : o["spec"]["template"]["metadata"]["labels"])
        p.labels[l.first.as<std::string>()] = l.second.as<std::string>();
      p.role = p.labels["tessera.io/role"];
      ASSERT_TRUE(lab.AddHost(p.host, next_host++));
      if (kind == "StatefulSet")
        names[p.name + "." + o["spec"]["serviceName"].as<std::string>()] = lab.Ip(p.host);
      std::map<std::string, std::string> mounts;
      for (const auto& t : o["spec"]["volumeClaimTemplates"]) {
        std::string claim = t["metadata"]["name"].as<std::string>();
        for (const auto& m : o["spec"]["template"]["spec"]["containers"][0]["volumeMounts"])
          if (m["name"].as<std::string>() == claim) {
            std::string to = dir_ + "/volumes/" + p.name + "-" + claim;
            fs::create_directories(to);
            mounts[m["mountPath"].as<std::string>()] = to;
          }
      }
      for (const auto& c : o["spec"]["template"]["spec"]["initContainers"])
        p.init.push_back(ReadContainer(c, p, lab.Ip(p.host), mounts));
      for (const auto& c : o["spec"]["template"]["spec"]["containers"])
        p.main.push_back(ReadContainer(c, p, lab.Ip(p.host), mounts));
      pods.push_back(std::move(p));
    }
  }
  for (const auto& o : objects) {  // a Service with a cluster address: the first pod it selects
    if (o["kind"].as<std::string>() != "Service" || o["spec"]["clusterIP"]) continue;
    for (const auto& p : pods) {
      bool match = true;
      for (const auto& s : o["spec"]["selector"])
        match &= p.labels.count(s.first.as<std::string>()) &&
                 p.labels.at(s.first.as<std::string>()) == s.second.as<std::string>();
      if (match) {
        names[o["metadata"]["name"].as<std::string>()] = lab.Ip(p.host);
        break;
      }
    }
  }
  ASSERT_EQ(pods.size(), 7u);  // etcd, 2 masters, 2 pservers, 2 trainers
  for (const auto& p : pods) lab.SetHostsFile(p.host, names);

  std::map<std::string, std::vector<Subprocess*>> running;  // role -> containers
  for (const char* role : {"etcd", "master", "pserver", "trainer"}) {
    for (const auto& p : pods) {
      if (p.role != role) continue;
      // The kubelet runs a pod's init containers in order, restarting a failed one until it succeeds
      // (the master's waits here for etcd to come up); bounded here.
      for (size_t i = 0; i < p.init.size(); ++i) {
        Subprocess* init = nullptr;
        std::optional<int> code;
        for (int attempt = 0; attempt < 60 && !(code && *code == 0); ++attempt) {
          if (attempt > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the kubelet's back-off
          init = &lab.Start(p.host, p.init[i].argv, dir_ + "/" + p.name + "-init.log", p.init[i].env);
          code = init->Wait(std::chrono::seconds(150));
        }
        ASSERT_TRUE(code.has_value() && *code == 0) << p.name << " init: " << init->Output();
      }
      for (const auto& c : p.main)
        running[role].push_back(&lab.Start(p.host, c.argv, dir_ + "/" + p.name + ".log", c.env));
    }
  }
  for (Subprocess* t : running["trainer"]) {
    auto code = t->Wait(std::chrono::seconds(300));
    ASSERT_TRUE(code.has_value()) << t->Output();
    EXPECT_EQ(*code, 0) << t->Output() << running["pserver"][0]->Output() << running["master"][0]->Output();
  }
  std::string logs = running["trainer"][0]->Output() + running["trainer"][1]->Output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m, std::regex("pass 2 evaluated on fm-test: accuracy=([0-9.]+)")))
      << logs;
  EXPECT_GE(std::stod(m[1]), 0.75) << logs;
  // The probes the manifests point at answer as rendered, from another pod, by Service name: the
  // console Service reaches the leading master; each pserver serves its index; the standby master
  // is alive but not ready.
  const Pod* trainer_pod = nullptr;
  std::vector<const Pod*> masters, pservers;
  for (const auto& p : pods) {
    if (p.role == "trainer") trainer_pod = &p;
    if (p.role == "master") masters.push_back(&p);
    if (p.role == "pserver") pservers.push_back(&p);
  }
  auto get = [&](const std::string& url, std::string* body) {
    return NetLab::Sh(
        "ip netns exec " + lab.Ns(trainer_pod->host) + " curl -s -o /dev/stderr -w '%{http_code}' " + url,
        body);
  };
  std::string body;
  get("http://kt-console:8080/readyz", &body);
  EXPECT_NE(body.find("leading"), std::string::npos) << body;
  EXPECT_NE(body.find("200"), std::string::npos) << body;
  for (const Pod* p : pservers) {
    get("http://" + lab.Ip(p->host) + ":8080/readyz", &body);
    EXPECT_NE(body.find("serving index"), std::string::npos) << body;
  }
  int not_ready = 0;
  for (const Pod* p : masters) {
    get("http://" + lab.Ip(p->host) + ":8080/readyz", &body);
    not_ready += body.find("503") != std::string::npos;
    get("http://" + lab.Ip(p->host) + ":8080/healthz", &body);
    EXPECT_NE(body.find("200"), std::string::npos) << body;
  }
  EXPECT_EQ(not_ready, 1);  // the standby
  // Both masters' init containers ran `job create --if-absent`: the second found the same job. A
  // different one is still refused, naming the difference.
  std::string out;
  EXPECT_NE(NetLab::Sh("ip netns exec " + lab.Ns(trainer_pod->host) + " " + BuildPath("src/tessera") +
                           " job create --etcd kt-etcd-0.kt-etcd:2379 --job kt --pservers 3 --if-absent",
                       &out),
            0);
  EXPECT_NE(out.find("already exists with pservers 2"), std::string::npos) << out;
  // The job was made with --tls, so every connection between the pods above was mutual TLS.
  ASSERT_EQ(NetLab::Sh("ip netns exec " + lab.Ns(trainer_pod->host) + " " + BuildPath("src/tessera") +
                           " job show --etcd kt-etcd-0.kt-etcd:2379 --job kt",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("mutual TLS between"), std::string::npos) << out;

  // The pservers advertised their pod addresses; the trainers reached them over TCP.
  EXPECT_NE(logs.find("over tcp"), std::string::npos) << logs;
  for (Subprocess* p : running["pserver"])
    EXPECT_NE(p->Output().find("(from POD_IP)"), std::string::npos) << p->Output();
  std::printf("k8s pods: 7 pods from the manifests trained the job; accuracy %s\n", m[1].str().c_str());
}

}  // namespace
}  // namespace tessera::testing
