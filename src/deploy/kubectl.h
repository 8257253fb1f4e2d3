// Running kubectl for a job: one call with its output, and applying a job's manifests so that
// every object is owned by the job's ConfigMap (deleting it deletes the job: Kubernetes' garbage
// collector follows ownerReferences). The thin I/O shell around k8s_manifests; used by `tessera
// deploy k8s --apply` and by the platform's Kubernetes backend. Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "deploy/k8s_manifests.h"
#include "tessera/status.h"

namespace tessera::deploy {

// Runs `kubectl args...` (its output and errors logged in `work_dir`/kubectl.log); returns the
// output, or an error carrying it. NotFound when there is no kubectl to run.
StatusOr<std::string> RunKubectl(const std::string& kubectl, const std::vector<std::string>& args,
                                 const std::string& work_dir, int timeout_s = 120);

// Applies `job` (RenderJob's output, the ConfigMap first) in `spec.namespace_`; returns what the
// last kubectl apply printed.
StatusOr<std::string> ApplyJob(const std::string& kubectl, const JobSpec& spec, std::vector<Manifest> job);

}  // namespace tessera::deploy
