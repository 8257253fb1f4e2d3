// Jobs on Kubernetes through kubectl (see k8s_backend.h).
#include "server_backends/k8s_backend.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "common/clock.h"
#include "common/files.h"
#include "deploy/k8s_manifests.h"
#include "deploy/kubectl.h"
#include "deploy/yaml_text.h"
#include "sandbox/confined_dir.h"
#include "server_backends/k8s_observe.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int64_t kLogCopyMs = 15000;

// `path` relative to `root`, when it is inside it.
StatusOr<std::string> Inside(const std::string& root, const std::string& path) {
  const std::string rel =
      fs::path(path).lexically_normal().lexically_relative(fs::path(root).lexically_normal());
  if (rel.empty() || rel == "." || rel.rfind("..", 0) == 0)
    return Status::InvalidArgument(path + " is not inside the data directory " + root +
                                   " (the volume every pod mounts)");
  return rel;
}

// The handle "k8s-namespace/job".
std::pair<std::string, std::string> SplitHandle(const std::string& handle) {
  const size_t slash = handle.find('/');
  if (slash == std::string::npos) return {"", handle};
  return {handle.substr(0, slash), handle.substr(slash + 1)};
}

}  // namespace

StatusOr<spec::JobSpec> KubernetesBackend::SpecFor(const K8sOptions& o, const JobLaunch& j) {
  if (o.data_claim.empty())
    return Status::FailedPrecondition(
        "the kubernetes backend needs --k8s-data-claim: the claim of the data directory");
  spec::JobSpec s = j.job;
  s.name = j.id;
  s.namespace_ = o.namespace_prefix + j.ns;
  s.image = o.image;
  s.etcd_members = 1;
  s.trainers_min = s.trainers_max = j.trainers;  // the first step waits for those started
  TESSERA_ASSIGN_OR_RETURN(std::string store, Inside(o.data_dir, j.store));
  TESSERA_ASSIGN_OR_RETURN(std::string run, Inside(o.data_dir, j.dir + "/run"));
  s.store = {"/tessera/store", o.data_claim, "", "", store};
  s.checkpoints = {"/tessera/run", o.data_claim, "", "", run};
  s.history_file = "/tessera/run/history.jsonl";
  if (s.model.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string code, Inside(o.data_dir, j.code_dir));
    s.code = {"/tessera/code", o.data_claim, "", "", code};
  }
  spec::Resources r;
  r.cpu = std::to_string(static_cast<int64_t>(j.cpu * 1000 + 0.5)) + "m";
  r.memory = std::to_string(j.memory_mb) + "Mi";
  for (const char* role : {"etcd", "master", "pserver"}) s.resources[role] = r;
  r.gpus = static_cast<int>(j.gpus);
  s.resources["trainer"] = r;
  return s;
}

StatusOr<std::string> KubernetesBackend::Start(const JobLaunch& job) {
  TESSERA_ASSIGN_OR_RETURN(spec::JobSpec spec, SpecFor(o_, job));
  // The run directory must exist on the volume before the pods mount it.
  std::error_code ec;
  fs::create_directories(job.dir + "/run", ec);
  fs::create_directories(job.dir + "/k8s", ec);
  if (ec) return Status::Unavailable("cannot create " + job.dir + "/k8s: " + ec.message());
  Json record = {{"job", job.id}, {"namespace", spec.namespace_}, {"launched_by", "tessera server"}};
  TESSERA_ASSIGN_OR_RETURN(auto manifests, deploy::RenderJob(spec, record.dump(2)));
  for (const auto& m : manifests)  // what was applied, kept with the job
    TESSERA_RETURN_IF_ERROR(WriteFileAtomic(job.dir + "/k8s/" + m.file, deploy::ToYaml(m.object)));
  TESSERA_RETURN_IF_ERROR(deploy::ApplyJob(o_.kubectl, spec, manifests).status());
  return spec.namespace_ + "/" + job.id;
}

StatusOr<Json> KubernetesBackend::GetJson(const std::string& dir, const std::vector<std::string>& args) {
  TESSERA_ASSIGN_OR_RETURN(std::string out, deploy::RunKubectl(o_.kubectl, args, dir, 30));
  const size_t brace = out.find('{');
  if (brace == std::string::npos) return Json();  // --ignore-not-found: nothing there
  Json j = Json::parse(out.substr(brace), nullptr, false);
  if (j.is_discarded())
    return Status::Unavailable("kubectl " + args[0] + " printed no JSON: " + out.substr(0, 300));
  return j;
}

JobObservation KubernetesBackend::Observe(const std::string& dir, const std::string& handle) {
  const auto [ns, id] = SplitHandle(handle);
  auto pods = GetJson(dir, {"get", "pods", "-n", ns, "-l", "tessera.io/job=" + id, "-o", "json"});
  auto trainers = GetJson(dir, {"get", "job", id + "-trainer", "-n", ns, "-o", "json", "--ignore-not-found"});
  if (!pods.ok() || !trainers.ok()) {
    // The cluster does not answer: nothing is known, so nothing is ended.
    spdlog::warn("server: job {}: kubectl: {}", id, (!pods.ok() ? pods : trainers).status().ToString());
    JobObservation o;
    o.alive = true;
    return o;
  }
  JobObservation o = ObserveKubernetesJob(*pods, *trainers);
  bool copy = !o.alive;
  {
    std::lock_guard<std::mutex> l(mu_);
    int64_t& last = logs_copied_ms_[dir];
    if (WallMillis() - last >= kLogCopyMs) copy = true;
    if (copy) last = WallMillis();
  }
  if (copy) CopyLogs(dir, ns, *pods);
  // Ended (every pass done, or failed): the masters and pservers that are left go too.
  if (!o.alive && !trainers->is_null())
    (void)deploy::RunKubectl(
        o_.kubectl, {"delete", "configmap", id, "-n", ns, "--ignore-not-found", "--wait=false"}, dir);
  return o;
}

void KubernetesBackend::CopyLogs(const std::string& dir, const std::string& ns, const Json& pods) {
  std::error_code ec;
  fs::create_directories(dir + "/logs", ec);
  for (const auto& [node, pod] : LogNames(ParsePods(pods))) {
    auto text = deploy::RunKubectl(o_.kubectl, {"logs", "-n", ns, pod, "--all-containers"}, dir, 30);
    if (text.ok()) (void)WriteFileAtomic(dir + "/logs/" + node + ".log", *text);
  }
}

Status KubernetesBackend::Scale(const std::string& dir, const std::string& handle, int trainers) {
  const auto [ns, id] = SplitHandle(handle);
  return deploy::RunKubectl(o_.kubectl,
                            {"patch", "job", id + "-trainer", "-n", ns, "--type=merge", "-p",
                             "{\"spec\":{\"parallelism\":" + std::to_string(trainers) + "}}"},
                            dir)
      .status();
}

Status KubernetesBackend::Stop(const std::string& dir, const std::string& handle, bool force) {
  const auto [ns, id] = SplitHandle(handle);
  auto pods = GetJson(dir, {"get", "pods", "-n", ns, "-l", "tessera.io/job=" + id, "-o", "json"});
  if (pods.ok()) CopyLogs(dir, ns, *pods);  // the last of the logs, before the pods go
  std::vector<std::string> args = {"delete", "configmap", id, "-n", ns, "--ignore-not-found", "--wait=false"};
  if (force) args.insert(args.end(), {"--grace-period=0", "--force"});
  return deploy::RunKubectl(o_.kubectl, args, dir).status();
}

std::vector<std::pair<std::string, std::string>> KubernetesBackend::Logs(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& name : sandbox::ConfinedDir(dir).Files("logs", ".log"))
    out.push_back({name.substr(0, name.size() - 4), "logs/" + name});
  return out;
}

}  // namespace tessera::server
