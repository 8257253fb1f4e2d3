// The Kubernetes objects of one job, rendered from its JobSpec: plain manifests, no operator.
//   etcd       StatefulSet + headless Service (1 or 3 members), unless the spec names endpoints
//   masters    Deployment (a leader and standbys; only the leader is ready) + the console Service
//   pservers   StatefulSet + headless Service
//   trainers   a Job whose parallelism is the number of trainers: scale it by changing
//              parallelism (a non-indexed Job, because trainers claim their ids themselves, so
//              any pod can come and go; an Indexed Job would tie ids to completions)
//   and a ServiceAccount, NetworkPolicies (only the job's own pods; the console from the
//   namespace), a ConfigMap holding the spec (the root that --apply makes every object's owner).
// Every object carries the labels tessera.io/job=<name> and app.kubernetes.io/*, so
// `kubectl delete all,netpol,sa,cm,pvc -l tessera.io/job=<name>` removes a job too.
// The namespace template (Namespace, ResourceQuota with GPUs, LimitRange) is separate: an
// administrator applies it once per team. Pure: no I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/job_spec.h"

namespace tessera::deploy {

// Rendered from the one job spec (spec/job_spec.h).
using spec::JobSpec;
using spec::VolumeSpec;

struct Manifest {
  std::string file;              // e.g. "30-pserver-statefulset.yaml"
  nlohmann::ordered_json object;
};

// Fails when the spec cannot run on Kubernetes (a volume with neither claim nor nfs).
StatusOr<std::vector<Manifest>> RenderJob(const JobSpec& spec, const std::string& spec_text);
std::vector<Manifest> RenderNamespaceTemplate(const JobSpec& spec);

}  // namespace tessera::deploy
