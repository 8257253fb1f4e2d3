// A Kubernetes job's state from kubectl's JSON (see k8s_observe.h).
#include "server_backends/k8s_observe.h"

#include <algorithm>
#include <map>

namespace tessera::server {
namespace {

using Json = nlohmann::json;

// Reasons a container waits that will not go away by waiting.
bool Hopeless(const std::string& reason) {
  return reason == "ImagePullBackOff" || reason == "ErrImagePull" || reason == "InvalidImageName" ||
         reason == "CreateContainerConfigError" || reason == "CreateContainerError";
}

}  // namespace

std::vector<PodView> ParsePods(const Json& pods) {
  std::vector<PodView> out;
  if (!pods.is_object() || !pods.contains("items") || !pods["items"].is_array()) return out;
  for (const auto& p : pods["items"]) {
    PodView v;
    if (!p.is_object()) continue;
    const Json meta = p.value("metadata", Json::object());
    const Json status = p.value("status", Json::object());
    v.name = meta.value("name", "");
    v.role = meta.value("labels", Json::object()).value("tessera.io/role", "");
    v.phase = status.value("phase", "Unknown");
    for (const auto& c : status.value("conditions", Json::array()))
      if (c.value("type", "") == "Ready") v.ready = c.value("status", "") == "True";
    for (const auto& cs : status.value("containerStatuses", Json::array())) {
      const Json state = cs.value("state", Json::object());
      if (state.contains("waiting")) {
        const std::string reason = state["waiting"].value("reason", "");
        if (reason != "ContainerCreating" && reason != "PodInitializing")
          v.problem = reason + ": " + state["waiting"].value("message", "");
      } else if (state.contains("terminated") && state["terminated"].value("exitCode", 0) != 0) {
        v.problem = state["terminated"].value("reason", "Error") + " (exit " +
                    std::to_string(state["terminated"].value("exitCode", 0)) + ")";
      }
    }
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [](const PodView& a, const PodView& b) { return a.name < b.name; });
  return out;
}

JobObservation ObserveKubernetesJob(const Json& pods, const Json& trainer_job) {
  JobObservation o;
  const auto views = ParsePods(pods);
  const Json status = trainer_job.is_object() ? trainer_job.value("status", Json::object()) : Json::object();
  for (const auto& c : status.is_object() ? status.value("conditions", Json::array()) : Json::array()) {
    if (c.value("status", "") != "True") continue;
    if (c.value("type", "") == "Complete") o.completed = true;
    if (c.value("type", "") == "Failed")
      o.why_ended = "the trainers failed: " + c.value("reason", "") + " " + c.value("message", "");
  }
  for (const auto& v : views) {
    if (v.role == "master" && v.ready) o.ready = true;
    // Starting can never succeed (no such image, a missing secret): the job has ended.
    const std::string reason = v.problem.substr(0, v.problem.find(':'));
    if (o.why_ended.empty() && Hopeless(reason))
      o.why_ended = "pod " + v.name + " cannot start: " + v.problem;
  }
  // Alive while its trainer Job exists and has not ended, even before the first pod is made.
  o.alive =
      trainer_job.is_object() && trainer_job.contains("metadata") && !o.completed && o.why_ended.empty();
  return o;
}

std::vector<std::pair<std::string, std::string>> LogNames(const std::vector<PodView>& pods) {
  std::map<std::string, int> seen;
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : pods) {
    if (p.role.empty()) continue;
    out.push_back({p.role + "-" + std::to_string(seen[p.role]++), p.name});
  }
  return out;
}

}  // namespace tessera::server
