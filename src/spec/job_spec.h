// JobSpec: one file that describes a whole training job for the launchers beyond one machine:
// `tessera deploy k8s` (manifests), `tessera launch --hosts` (ssh) and `tessera launch --mpi`.
// Parsed from YAML (JSON is YAML too), every field checked, every error naming the field's path
// ("job.yaml: trainers.min: ..."); unknown fields are refused with the nearest known name, so a
// typo never silently becomes a default. A value type; the format is in docs/deploy.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "job/job_config.h"
#include "tessera/status.h"

namespace tessera::spec {

// The optimizer of a job that names none, wherever it is started.
inline constexpr char kDefaultOptimizer[] = "adam:lr=0.001";

// Where a shared directory (the data-set store, the checkpoints) comes from.
struct VolumeSpec {
  std::string path;        // where every process sees it (a mount point); required
  std::string claim;       // Kubernetes: a PersistentVolumeClaim to mount there
  std::string nfs_server;  // Kubernetes: or an NFS export
  std::string nfs_path;
  std::string sub_path;  // Kubernetes: mount only this directory of it (set by the platform)
};

struct Resources {
  std::string cpu, memory;  // Kubernetes quantities, e.g. "2", "500m", "4Gi"; empty: unset
  int gpus = 0;             // nvidia.com/gpu
};

struct JobSpec {
  std::string name;  // the job (a DNS label: lowercase letters, digits, '-')
  std::string image = "tessera:latest";
  std::string image_pull_policy = "IfNotPresent";
  std::string namespace_ = "default";

  // etcd: external endpoints, or members run inside the job (1 or 3).
  std::vector<std::string> etcd_endpoints;
  int etcd_members = 1;

  int masters = 2;  // a leader and standbys
  int pservers = 1;
  int replicas = 1;  // copies of every shard, each on a different pserver (`job create --replicas`)
  // Elastic: the job has `pservers` shards and starts this many pserver pods (1..pservers); the
  // StatefulSet is scaled while it runs and shards move live. 0: `pservers` pods, fixed.
  int start_pservers = 0;
  int trainers_min = 1, trainers_max = 1;

  std::map<std::string, Resources> resources;  // by role: etcd, master, pserver, trainer

  // The training itself.
  std::string mode = "sync";
  std::string optimizer = kDefaultOptimizer;
  int passes = 1;
  std::string dataset, eval_dataset;
  int batch_size = 64;
  std::string model;  // a built-in model, or
  std::vector<std::string> model_args;
  std::vector<std::string> command;  // the trainer's own command (TESSERA_* in its environment)
  int lease_ttl = 10;
  double checkpoint_every = 30;  // seconds; 0: no checkpoints
  // Sync: consistent checkpoints at every multiple of N steps (0: off); a lost pserver then rolls
  // the whole job back to the newest (JobConfig::checkpoint_steps).
  int64_t checkpoint_steps = 0;
  int backup_trainers = 0;         // sync: a step closes once all but this many trainers pushed
  std::string nonfinite = "skip";  // a gradient with NaN or infinity: skip or error
  std::string wire = "f32";        // how gradients and values travel (job/wire_format.h)
  double task_timeout = 60;        // seconds before a pending task is handed out again
  int max_failures = 3;            // failures of a task before it is given up for the pass
  int chunks_per_task = 0;         // 0: the master's choice (about 4 MiB of records a task)
  std::string transport = "auto";

  VolumeSpec store, checkpoints;
  // Set by the platform (not read from a spec): the trainers' code, mounted at code.path and
  // their working directory; the master's run history, a file under checkpoints.path.
  VolumeSpec code;
  std::string history_file;
  // Mutual TLS between the job's processes (the job is created with --tls): the job's CA and a
  // node certificate and key, as `tessera certs --node node` writes them (ca.pem, node.pem,
  // node.key), in tls_dir on every host; on Kubernetes the Secret tls_secret is mounted there.
  // Empty tls_dir: no TLS.
  std::string tls_dir, tls_secret;
  int http_port = 8080;  // each process's /healthz, /readyz, /metrics (and the console)
  int port = 7000;       // pservers' and masters' main port

  bool external_etcd() const { return !etcd_endpoints.empty(); }
  // The pservers keep checkpoints (timed, or consistent every N steps) in checkpoints.path.
  bool keeps_checkpoints() const { return checkpoint_every > 0 || checkpoint_steps > 0; }
  // The etcd endpoints the job's processes use (the in-job Service names when not external).
  std::vector<std::string> EtcdEndpoints() const;
  std::string EtcdText() const;  // joined with ','
  // The `tessera job create` arguments after "--etcd E --job J".
  std::vector<std::string> JobCreateArgs() const;
  bool tls() const { return !tls_dir.empty(); }
  // The three files under tls_dir (empty without TLS).
  struct TlsFiles {
    std::string ca, cert, key;
  };
  TlsFiles Tls() const;
  // TESSERA_TLS_CA, _CERT, _KEY for every process of a TLS job (none without TLS).
  std::vector<std::pair<std::string, std::string>> TlsEnv() const;
};

// A trainer command given as one line for /bin/sh (`--trainer-cmd`, the platform's field form):
// {"/bin/sh", "-c", line}.
std::vector<std::string> ShellCommand(const std::string& line);
// The other way: a command as one /bin/sh line, for people and for what runs it after another
// command (`cd CODE && ...`): a ShellCommand's line, else each word quoted for the shell.
std::string ShellLine(const std::vector<std::string>& command);

// The job's configuration in etcd (what `tessera job create` writes) that the spec asks for:
// its pservers, mode, optimizer, min trainers (1 when async), replicas, elastic start, backup
// trainers, consistent checkpoints and non-finite policy. Checked (JobConfig::Validate).
StatusOr<JobConfig> JobConfigOf(const JobSpec& s);

// Where the job runs. A cluster's processes find the data set store, and with checkpoints their
// directory, only where the spec says (both required); on this machine (`tessera local --spec`)
// the store may come from --store and the checkpoints default to the run directory.
enum class Where { kCluster, kThisMachine };

// Parses and checks a spec. `origin` names the source in messages (a file name).
StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& origin,
                               Where where = Where::kCluster);
StatusOr<JobSpec> LoadJobSpec(const std::string& path, Where where = Where::kCluster);

}  // namespace tessera::spec
