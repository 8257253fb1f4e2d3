// Rendering a job's Kubernetes objects (see k8s_manifests.h).
#include "deploy/k8s_manifests.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/busy_poll.h"
#include "common/flag_names.h"
#include "common/math_threads.h"
#include "common/strings.h"
#include "spec/role_argv.h"

namespace tessera::deploy {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kEtcdClientPort = 2379, kEtcdPeerPort = 2380;
// The image's unprivileged user (deploy/Dockerfile), whom every container runs as.
constexpr int kJobUser = 10001;

Json Labels(const JobSpec& s, const std::string& role) {
  Json l = {{"app.kubernetes.io/name", "tessera"},
            {"app.kubernetes.io/instance", s.name},
            {"app.kubernetes.io/managed-by", "tessera-deploy"},
            {"tessera.io/job", s.name}};
  if (!role.empty()) {
    l["app.kubernetes.io/component"] = role;
    l["tessera.io/role"] = role;
  }
  return l;
}

Json Selector(const JobSpec& s, const std::string& role) {
  return {{"tessera.io/job", s.name}, {"tessera.io/role", role}};
}

Json Meta(const JobSpec& s, const std::string& name, const std::string& role) {
  return {{"name", name}, {"namespace", s.namespace_}, {"labels", Labels(s, role)}};
}

Json FieldEnv(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}
Json Env(const std::string& name, const std::string& value) { return {{"name", name}, {"value", value}}; }

// POD_IP (what nodes advertise), POD_NAME, and the job's coordinates.
Json BaseEnv(const JobSpec& s) {
  Json env = Json::array({FieldEnv("POD_IP", "status.podIP"), FieldEnv("POD_NAME", "metadata.name"),
                          Env(flags::kEnvEtcd, s.EtcdText()), Env(flags::kEnvJob, s.name)});
  for (const auto& [k, v] : s.TlsEnv()) env.push_back(Env(k, v));
  return env;
}

// A --tls job's certificates (the Secret tls.secret, readable by its owner only, as the key must
// be) mounted read-only at tls.path in every container of `pod`, init containers too; BaseEnv
// points TESSERA_TLS_* there.
Json WithTls(const JobSpec& s, Json pod) {
  if (!s.tls()) return pod;
  const Json mount = {{"name", "tls"}, {"mountPath", s.tls_dir}, {"readOnly", true}};
  for (const char* list : {"initContainers", "containers"}) {
    if (!pod.contains(list)) continue;
    for (auto& c : pod[list]) c["volumeMounts"].push_back(mount);
  }
  pod["volumes"].push_back(
      {{"name", "tls"}, {"secret", {{"secretName", s.tls_secret}, {"defaultMode", 0400}}}});
  return pod;
}

Json Resources(const JobSpec& s, const std::string& role) {
  auto it = s.resources.find(role);
  if (it == s.resources.end()) return Json::object();
  Json req = Json::object(), lim = Json::object();
  if (!it->second.cpu.empty()) req["cpu"] = it->second.cpu;
  if (!it->second.memory.empty()) {
    req["memory"] = it->second.memory;
    lim["memory"] = it->second.memory;
  }
  if (it->second.gpus > 0) {
    req["nvidia.com/gpu"] = std::to_string(it->second.gpus);
    lim["nvidia.com/gpu"] = std::to_string(it->second.gpus);  // GPUs: limits must equal requests
  }
  Json r = Json::object();
  if (!req.empty()) r["requests"] = req;
  if (!lim.empty()) r["limits"] = lim;
  return r;
}

Json HttpProbe(const std::string& path, int port, int period, int failures) {
  return {{"httpGet", {{"path", path}, {"port", port}}},
          {"periodSeconds", period},
          {"timeoutSeconds", 3},
          {"failureThreshold", failures}};
}

Json PromAnnotations(int port) {
  return {{"prometheus.io/scrape", "true"},
          {"prometheus.io/port", std::to_string(port)},
          {"prometheus.io/path", "/metrics"}};
}

Json Volume(const std::string& name, const VolumeSpec& v) {
  if (!v.claim.empty()) return {{"name", name}, {"persistentVolumeClaim", {{"claimName", v.claim}}}};
  return {{"name", name}, {"nfs", {{"server", v.nfs_server}, {"path", v.nfs_path}}}};
}

// A tessera container: `tessera <args...>`.
Json Container(const JobSpec& s, const std::string& name, const std::vector<std::string>& args, Json env) {
  return {{"name", name},
          {"image", s.image},
          {"imagePullPolicy", s.image_pull_policy},
          {"command", Json::array({"tessera"})},
          {"args", args},
          {"env", std::move(env)}};
}

Json PodSpec(const JobSpec& s, Json containers, Json volumes, int grace_seconds) {
  Json p = {{"serviceAccountName", s.name},
            {"automountServiceAccountToken", false},
            {"terminationGracePeriodSeconds", grace_seconds},
            {"containers", std::move(containers)}};
  if (!volumes.empty()) p["volumes"] = std::move(volumes);
  return p;
}

// Every pod as a job's process should run (docs/security.md, "Kubernetes"): as the image's
// unprivileged user, never root; the runtime's default seccomp profile; in each container, a
// read-only root file system (a scratch /tmp, which is also HOME, is writable), no capability
// and no way to gain one.
Json Hardened(Json pod) {
  pod["securityContext"] = {{"runAsNonRoot", true},
                            {"runAsUser", kJobUser},
                            {"runAsGroup", kJobUser},
                            {"fsGroup", kJobUser},
                            {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  if (!pod.contains("volumes")) pod["volumes"] = Json::array();
  pod["volumes"].push_back({{"name", "tmp"}, {"emptyDir", Json::object()}});
  for (const char* list : {"initContainers", "containers"}) {
    if (!pod.contains(list)) continue;
    for (auto& c : pod[list]) {
      c["securityContext"] = {{"allowPrivilegeEscalation", false},
                              {"readOnlyRootFilesystem", true},
                              {"capabilities", {{"drop", Json::array({"ALL"})}}}};
      if (!c.contains("volumeMounts")) c["volumeMounts"] = Json::array();
      c["volumeMounts"].push_back({{"name", "tmp"}, {"mountPath", "/tmp"}});
      if (!c.contains("env")) c["env"] = Json::array();
      c["env"].push_back({{"name", "HOME"}, {"value", "/tmp"}});
    }
  }
  return pod;
}

Json Template(const JobSpec& s, const std::string& role, Json pod, bool scrape) {
  Json meta = {{"labels", Labels(s, role)}};
  if (scrape) meta["annotations"] = PromAnnotations(s.http_port);
  return {{"metadata", std::move(meta)}, {"spec", Hardened(std::move(pod))}};
}

Json Port(const std::string& name, int port) {
  return {{"name", name}, {"containerPort", port}, {"protocol", "TCP"}};
}
Json ServicePort(const std::string& name, int port) {
  return {{"name", name}, {"port", port}, {"targetPort", port}, {"protocol", "TCP"}};
}

Json Mount(const std::string& name, const VolumeSpec& v) {
  Json m = {{"name", name}, {"mountPath", v.path}};
  if (!v.sub_path.empty()) m["subPath"] = v.sub_path;
  return m;
}

Manifest EtcdService(const JobSpec& s) {
  return {"10-etcd-service.yaml",
          {{"apiVersion", "v1"},
           {"kind", "Service"},
           {"metadata", Meta(s, s.name + "-etcd", "etcd")},
           {"spec",
            {{"clusterIP", "None"},
             {"publishNotReadyAddresses", true},  // members must find each other before they are ready
             {"selector", Selector(s, "etcd")},
             {"ports",
              Json::array({ServicePort("client", kEtcdClientPort), ServicePort("peer", kEtcdPeerPort)})}}}}};
}

Manifest EtcdStatefulSet(const JobSpec& s) {
  const std::string svc = s.name + "-etcd";
  std::vector<std::string> cluster;
  for (int i = 0; i < s.etcd_members; ++i)
    cluster.push_back(fmt::format("{0}-{1}=http://{0}-{1}.{0}:{2}", svc, i, kEtcdPeerPort));
  Json c = {
      {"name", "etcd"},
      {"image", s.image},
      {"imagePullPolicy", s.image_pull_policy},
      {"command", Json::array({"/usr/bin/etcd"})},
      {"args",
       Json::array({"--name=$(POD_NAME)", "--data-dir=/var/lib/etcd/data",
                    fmt::format("--listen-client-urls=http://0.0.0.0:{}", kEtcdClientPort),
                    fmt::format("--advertise-client-urls=http://$(POD_NAME).{}:{}", svc, kEtcdClientPort),
                    fmt::format("--listen-peer-urls=http://0.0.0.0:{}", kEtcdPeerPort),
                    fmt::format("--initial-advertise-peer-urls=http://$(POD_NAME).{}:{}", svc, kEtcdPeerPort),
                    "--initial-cluster=" + Join(cluster, ","), "--initial-cluster-state=new",
                    "--initial-cluster-token=" + svc, "--log-level=warn"})},
      {"env", Json::array({FieldEnv("POD_NAME", "metadata.name")})},
      {"ports", Json::array({Port("client", kEtcdClientPort), Port("peer", kEtcdPeerPort)})},
      {"livenessProbe", HttpProbe("/health", kEtcdClientPort, 10, 6)},
      {"readinessProbe", HttpProbe("/health", kEtcdClientPort, 5, 3)},
      {"volumeMounts", Json::array({Mount("data", VolumeSpec{"/var/lib/etcd", "", "", "", ""})})}};
  for (const auto& f : spec::EtcdServerFlags()) c["args"].push_back(f);
  if (Json r = Resources(s, "etcd"); !r.empty()) c["resources"] = r;
  return {"11-etcd-statefulset.yaml",
          {{"apiVersion", "apps/v1"},
           {"kind", "StatefulSet"},
           {"metadata", Meta(s, svc, "etcd")},
           {"spec",
            {{"serviceName", svc},
             {"replicas", s.etcd_members},
             {"podManagementPolicy", "Parallel"},  // members start together to form the cluster
             {"selector", {{"matchLabels", Selector(s, "etcd")}}},
             {"template", Template(s, "etcd", PodSpec(s, Json::array({c}), Json::array(), 30), false)},
             {"volumeClaimTemplates",
              Json::array({{{"metadata", {{"name", "data"}, {"labels", Labels(s, "etcd")}}},
                            {"spec",
                             {{"accessModes", Json::array({"ReadWriteOnce"})},
                              {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}}})}}}}};
}

Manifest MasterDeployment(const JobSpec& s) {
  std::vector<std::string> create = {"job", "create", "--etcd-timeout", "120"};
  for (const auto& a : s.JobCreateArgs()) create.push_back(a);
  std::vector<std::string> args = spec::MasterArgs(s, spec::PortChoice::kSpec);
  Json init = Container(s, "job-create", create, BaseEnv(s));
  Json c = Container(s, "master", args, BaseEnv(s));
  c["ports"] = Json::array({Port("grpc", s.port), Port("http", s.http_port)});
  c["livenessProbe"] = HttpProbe("/healthz", s.http_port, 10, 6);
  c["readinessProbe"] = HttpProbe("/readyz", s.http_port, 5, 1);  // only the leader is ready
  Json mounts = Json::array({Mount("store", s.store)}), volumes = Json::array({Volume("store", s.store)});
  if (!s.history_file.empty()) {  // the run history, on the checkpoints' volume
    mounts.push_back(Mount("checkpoints", s.checkpoints));
    volumes.push_back(Volume("checkpoints", s.checkpoints));
  }
  c["volumeMounts"] = mounts;
  if (Json r = Resources(s, "master"); !r.empty()) c["resources"] = r;
  Json pod = PodSpec(s, Json::array({c}), volumes, 30);
  pod["initContainers"] = Json::array({init});
  pod = WithTls(s, std::move(pod));
  return {"20-master-deployment.yaml",
          {{"apiVersion", "apps/v1"},
           {"kind", "Deployment"},
           {"metadata", Meta(s, s.name + "-master", "master")},
           {"spec",
            {{"replicas", s.masters},
             {"selector", {{"matchLabels", Selector(s, "master")}}},
             {"template", Template(s, "master", std::move(pod), true)}}}}};
}

Manifest ConsoleService(const JobSpec& s) {
  return {"21-console-service.yaml",
          {{"apiVersion", "v1"},
           {"kind", "Service"},
           {"metadata", Meta(s, s.name + "-console", "master")},
           {"spec",
            {{"type", "ClusterIP"},
             {"selector", Selector(s, "master")},
             {"ports", Json::array({ServicePort("http", s.http_port)})}}}}};
}

Manifest PserverService(const JobSpec& s) {
  return {"30-pserver-service.yaml",
          {{"apiVersion", "v1"},
           {"kind", "Service"},
           {"metadata", Meta(s, s.name + "-pserver", "pserver")},
           {"spec",
            {{"clusterIP", "None"},
             {"selector", Selector(s, "pserver")},
             {"ports", Json::array({ServicePort("data", s.port), ServicePort("http", s.http_port)})}}}}};
}

// Whole cores in a Kubernetes CPU quantity ("2", "1.5", "500m"): 0 when it is less than one or
// not a plain number.
int WholeCores(const std::string& cpu) {
  if (cpu.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(cpu.c_str(), &end);
  if (end == cpu.c_str() || !(v > 0) || v > 1e6) return 0;
  const std::string unit(end);
  if (unit == "m") return static_cast<int>(v / 1000);
  return unit.empty() ? static_cast<int>(v) : 0;
}

// Busy polling for a role whose pods request at least a whole core: a poller then spins within
// the share the scheduler set aside for it. (A CPU limit that some policy adds is no harm
// either: the poller backs off when a quota stops it, common/busy_poll.h.)
void AddBusyPoll(const JobSpec& s, const std::string& role, Json* env) {
  auto r = s.resources.find(role);
  if (r == s.resources.end() || WholeCores(r->second.cpu) < 1) return;
  env->push_back(Env(flags::kEnvBusyPoll, std::to_string(kBusyPollMicros)));
}

Manifest PserverStatefulSet(const JobSpec& s) {
  std::vector<std::string> args = spec::PserverArgs(s, spec::PortChoice::kSpec);
  Json mounts = Json::array(), volumes = Json::array();
  if (s.keeps_checkpoints()) {
    mounts.push_back(Mount("checkpoints", s.checkpoints));
    volumes.push_back(Volume("checkpoints", s.checkpoints));
  }
  Json env = BaseEnv(s);
  AddBusyPoll(s, "pserver", &env);
  Json c = Container(s, "pserver", args, env);
  c["ports"] = Json::array({Port("data", s.port), Port("http", s.http_port)});
  c["livenessProbe"] = HttpProbe("/healthz", s.http_port, 10, 6);
  c["readinessProbe"] = HttpProbe("/readyz", s.http_port, 5, 3);
  if (!mounts.empty()) c["volumeMounts"] = mounts;
  if (Json r = Resources(s, "pserver"); !r.empty()) c["resources"] = r;
  // Elastic: scaled with `kubectl scale`; a pod removed hands its shards over first (the pserver
  // takes at most 60 s for that).
  const bool elastic = s.start_pservers > 0;
  Json meta = Meta(s, s.name + "-pserver", "pserver");
  if (elastic) meta["annotations"] = {{"tessera.io/max-pservers", std::to_string(s.pservers)}};
  return {"31-pserver-statefulset.yaml",
          {{"apiVersion", "apps/v1"},
           {"kind", "StatefulSet"},
           {"metadata", std::move(meta)},
           {"spec",
            {{"serviceName", s.name + "-pserver"},
             {"replicas", elastic ? s.start_pservers : s.pservers},
             {"podManagementPolicy", "Parallel"},
             {"selector", {{"matchLabels", Selector(s, "pserver")}}},
             {"template",
              Template(s, "pserver", WithTls(s, PodSpec(s, Json::array({c}), volumes, elastic ? 90 : 30)),
                       true)}}}}};
}

Manifest TrainerJob(const JobSpec& s) {
  Json env = BaseEnv(s);
  AddBusyPoll(s, "trainer", &env);
  for (const auto& [k, v] : spec::TrainerEnv(s, spec::PortChoice::kSpec)) env.push_back(Env(k, v));
  // A trainer with a CPU request sizes its math libraries to it (they would otherwise start a
  // thread per core of the node: common/math_threads.h).
  if (auto r = s.resources.find("trainer"); r != s.resources.end() && !r->second.cpu.empty()) {
    const auto none = [](const char*) -> const char* { return nullptr; };
    for (const auto& [k, v] : MathThreadEnv(WholeCores(r->second.cpu), 1, none)) env.push_back(Env(k, v));
  }
  Json c;
  if (spec::TrainerCommand cmd = spec::TrainerArgs(s); cmd.builtin) {
    c = Container(s, "trainer", cmd.argv, env);
  } else {
    c = {{"name", "trainer"},
         {"image", s.image},
         {"imagePullPolicy", s.image_pull_policy},
         {"command", cmd.argv},
         {"env", env}};
  }
  c["ports"] = Json::array({Port("http", s.http_port)});
  c["livenessProbe"] = HttpProbe("/healthz", s.http_port, 10, 6);
  c["readinessProbe"] = HttpProbe("/readyz", s.http_port, 5, 3);
  Json mounts = Json::array({Mount("store", s.store)}), volumes = Json::array({Volume("store", s.store)});
  if (!s.code.path.empty()) {  // the user's code, where the command runs
    mounts.push_back(Mount("code", s.code));
    volumes.push_back(Volume("code", s.code));
    c["workingDir"] = s.code.path;
  }
  c["volumeMounts"] = mounts;
  if (Json r = Resources(s, "trainer"); !r.empty()) c["resources"] = r;
  Json pod = WithTls(s, PodSpec(s, Json::array({c}), volumes, 60));
  pod["restartPolicy"] = "OnFailure";
  Json meta = Meta(s, s.name + "-trainer", "trainer");
  meta["annotations"] = {{"tessera.io/min-trainers", std::to_string(s.trainers_min)},
                         {"tessera.io/max-trainers", std::to_string(s.trainers_max)}};
  return {"40-trainer-job.yaml",
          {{"apiVersion", "batch/v1"},
           {"kind", "Job"},
           {"metadata", std::move(meta)},
           {"spec",
            {{"parallelism", s.trainers_min},
             {"completionMode", "NonIndexed"},
             {"backoffLimit", 20 * s.trainers_max},
             {"template", Template(s, "trainer", std::move(pod), false)}}}}};
}

Manifest Policy(const JobSpec& s) {
  Json own = {{"podSelector", {{"matchLabels", {{"tessera.io/job", s.name}}}}}};
  return {"50-networkpolicy.yaml",
          {{"apiVersion", "networking.k8s.io/v1"},
           {"kind", "NetworkPolicy"},
           {"metadata", Meta(s, s.name, "")},
           {"spec",
            {{"podSelector", {{"matchLabels", {{"tessera.io/job", s.name}}}}},
             {"policyTypes", Json::array({"Ingress"})},
             {"ingress", Json::array({{{"from", Json::array({own})}}})}}}}};
}

Manifest ConsolePolicy(const JobSpec& s) {
  return {"51-console-networkpolicy.yaml",
          {{"apiVersion", "networking.k8s.io/v1"},
           {"kind", "NetworkPolicy"},
           {"metadata", Meta(s, s.name + "-console", "master")},
           {"spec",
            {{"podSelector", {{"matchLabels", Selector(s, "master")}}},
             {"policyTypes", Json::array({"Ingress"})},
             {"ingress",
              Json::array({{{"from", Json::array({{{"podSelector", Json::object()}}})},
                            {"ports", Json::array({{{"protocol", "TCP"}, {"port", s.http_port}}})}}})}}}}};
}

}  // namespace

StatusOr<std::vector<Manifest>> RenderJob(const JobSpec& s, const std::string& spec_text) {
  std::vector<std::pair<std::string, const VolumeSpec*>> mounted = {{"store", &s.store}};
  if (s.keeps_checkpoints() || !s.history_file.empty()) mounted.push_back({"checkpoints", &s.checkpoints});
  if (!s.code.path.empty()) mounted.push_back({"code", &s.code});
  if (!s.history_file.empty() && s.history_file.rfind(s.checkpoints.path + "/", 0) != 0)
    return Status::InvalidArgument("the run history " + s.history_file +
                                   " must be under the checkpoints' path " + s.checkpoints.path);
  if (s.tls() && s.tls_secret.empty()) {
    return Status::InvalidArgument(
        "tls: on Kubernetes it needs secret: the name of a Secret holding the job's ca.pem, node.pem and "
        "node.key (tessera certs --job " +
        s.name + " --out certs --node node; kubectl -n " + s.namespace_ + " create secret generic " + s.name +
        "-tls --from-file=certs/ca.pem --from-file=certs/node.pem "
        "--from-file=certs/node.key)");
  }
  for (const auto& [name, v] : mounted) {
    if (v->claim.empty() && v->nfs_server.empty())
      return Status::InvalidArgument(
          name +
          ": on Kubernetes it needs a claim (a PersistentVolumeClaim, ReadWriteMany) "
          "or nfs: {server, path}, mounted at its path in every pod");
  }
  std::vector<Manifest> out;
  out.push_back({"00-job-configmap.yaml",
                 {{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"metadata", Meta(s, s.name, "")},
                  {"data", {{"job.yaml", spec_text}}}}});
  out.push_back({"01-serviceaccount.yaml",
                 {{"apiVersion", "v1"},
                  {"kind", "ServiceAccount"},
                  {"metadata", Meta(s, s.name, "")},
                  {"automountServiceAccountToken", false}}});
  if (!s.external_etcd()) {
    out.push_back(EtcdService(s));
    out.push_back(EtcdStatefulSet(s));
  }
  out.push_back(MasterDeployment(s));
  out.push_back(ConsoleService(s));
  out.push_back(PserverService(s));
  out.push_back(PserverStatefulSet(s));
  out.push_back(TrainerJob(s));
  out.push_back(Policy(s));
  out.push_back(ConsolePolicy(s));
  return out;
}

std::vector<Manifest> RenderNamespaceTemplate(const JobSpec& s) {
  int64_t gpus = 0;
  auto it = s.resources.find("trainer");
  if (it != s.resources.end()) gpus += int64_t{it->second.gpus} * s.trainers_max;
  it = s.resources.find("pserver");
  if (it != s.resources.end()) gpus += int64_t{it->second.gpus} * s.pservers;
  const int pods = (s.external_etcd() ? 0 : s.etcd_members) + s.masters + s.pservers + s.trainers_max;
  Json hard = {{"pods", std::to_string(pods * 2)},
               {"requests.nvidia.com/gpu", std::to_string(gpus)},
               {"persistentvolumeclaims", std::to_string(s.etcd_members + 4)}};
  Json ns_meta = {{"name", s.namespace_}, {"labels", {{"app.kubernetes.io/managed-by", "tessera-deploy"}}}};
  return {
      {"namespace/00-namespace.yaml", {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", ns_meta}}},
      {"namespace/01-resourcequota.yaml",
       {{"apiVersion", "v1"},
        {"kind", "ResourceQuota"},
        {"metadata", {{"name", "tessera-quota"}, {"namespace", s.namespace_}}},
        {"spec", {{"hard", hard}}}}},
      {"namespace/02-limitrange.yaml",
       {{"apiVersion", "v1"},
        {"kind", "LimitRange"},
        {"metadata", {{"name", "tessera-limits"}, {"namespace", s.namespace_}}},
        {"spec",
         {{"limits", Json::array({{{"type", "Container"},
                                   {"defaultRequest", {{"cpu", "250m"}, {"memory", "256Mi"}}},
                                   {"default", {{"memory", "2Gi"}}}}})}}}}}};
}

}  // namespace tessera::deploy
