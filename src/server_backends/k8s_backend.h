// KubernetesBackend: runs each job in the cluster kubectl reaches (its current context), in the
// Kubernetes namespace of the job's platform namespace (a prefix + its name), from the manifests
// of `tessera deploy k8s` (src/deploy). The server's --data-dir must be on a ReadWriteMany volume
// (a PersistentVolumeClaim) that every pod mounts: the data sets, the job's code and its run
// directory (checkpoints and the master's run history, which the server reads as for local jobs)
// are sub-directories of it. The pods' phases are watched through kubectl; their logs are copied
// into the job's directory every 15 s and when it ends, so they outlive the pods. Stopping a job
// deletes its ConfigMap, which owns every other object. Thread-compatible: the server's monitor
// calls it from one thread.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "server_backends/backend.h"
#include "spec/job_spec.h"

namespace tessera::server {

struct K8sOptions {
  std::string kubectl = "kubectl";
  std::string image = "tessera:latest";
  std::string data_claim;        // the claim holding the server's data directory
  std::string data_dir;          // that directory, as the server sees it
  std::string namespace_prefix;  // Kubernetes namespace = prefix + the platform namespace
};

class KubernetesBackend : public Backend {
 public:
  explicit KubernetesBackend(K8sOptions o) : o_(std::move(o)) {}
  std::string Name() const override { return "kubernetes"; }
  StatusOr<std::string> Start(const JobLaunch& job) override;
  JobObservation Observe(const std::string& dir, const std::string& handle) override;
  Status Scale(const std::string& dir, const std::string& handle, int trainers) override;
  Status Stop(const std::string& dir, const std::string& handle, bool force) override;
  std::vector<std::pair<std::string, std::string>> Logs(const std::string& dir) override;

  // The job spec a launch becomes (pure): its Kubernetes namespace, the volume's sub-paths, the
  // resources of every process. InvalidArgument when a path is not under the data directory.
  static StatusOr<spec::JobSpec> SpecFor(const K8sOptions& o, const JobLaunch& job);

 private:
  void CopyLogs(const std::string& dir, const std::string& ns, const nlohmann::json& pods);
  StatusOr<nlohmann::json> GetJson(const std::string& dir, const std::vector<std::string>& args);

  K8sOptions o_;
  std::mutex mu_;
  std::map<std::string, int64_t> logs_copied_ms_;  // job dir -> when its logs were last copied
};

}  // namespace tessera::server
