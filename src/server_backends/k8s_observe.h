// What the Kubernetes backend sees of a job, decided from kubectl's JSON alone: the job's pods
// (`kubectl get pods -l tessera.io/job=ID -o json`) and its trainers' Job (`kubectl get job
// ID-trainer -o json`). Pure: no kubectl, no clock; tested on recorded answers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_backends/backend.h"

namespace tessera::server {

struct PodView {
  std::string name, role;  // role: etcd, master, pserver, trainer (the tessera.io/role label)
  std::string phase;       // Pending, Running, Succeeded, Failed, Unknown
  bool ready = false;
  std::string problem;  // a container waiting or ended for a reason (ImagePullBackOff, OOMKilled, ...)
};

std::vector<PodView> ParsePods(const nlohmann::json& pods);

// The job from its pods and its trainer Job:
//  completed  the trainer Job's condition Complete (every trainer ended with every pass done);
//  ended      the trainer Job's condition Failed, or a pod that cannot start (image, config);
//  ready      a master pod is ready (the leader);
//  alive      its trainer Job exists (null when kubectl found none) and has not ended.
JobObservation ObserveKubernetesJob(const nlohmann::json& pods, const nlohmann::json& trainer_job);

// The node name of a pod for its log: "master-0", "pserver-1", "trainer-2" (numbered by its
// order among the pods of its role, sorted by name), "etcd-0".
std::vector<std::pair<std::string, std::string>> LogNames(const std::vector<PodView>& pods);

}  // namespace tessera::server
