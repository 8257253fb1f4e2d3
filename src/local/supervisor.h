// Supervisor: `tessera local`, a whole job on this machine. It starts an etcd (unless one is
// given) with its data in the run directory, creates the job, and runs P pservers, a master (and
// standbys) and T trainers (a built-in model or the user's command), each with its log in
// <run>/logs/. A process that exits is restarted with backoff (RestartPolicy), as Kubernetes
// would; trainers that finish are done. The number of trainers (and of an elastic job's pservers)
// follows the etcd keys that `tessera local scale` writes. When every pass is done and every trainer
// finished, it exports the model to one file, writes <run>/result.json, stops everything in order (trainers,
// masters, pservers, etcd) and returns. A stop request (Ctrl-C, SIGTERM) stops everything the same way.
// Thread-safety: Run() blocks its caller; `stop` may be set from any thread.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "tessera/status.h"

namespace tessera::local {

struct LocalOptions {
  std::string run_dir;
  std::string job = "local";
  std::string etcd;  // host:port of an etcd to use; empty: start one in the run directory
  std::string store, dataset, eval_dataset;
  std::string model;        // a built-in model, or
  std::string trainer_cmd;  // a command run through /bin/sh for each trainer
  std::vector<std::string> model_args;
  int batch_size = 64;
  int pservers = 1;
  int trainers = 1;
  int min_trainers = 0;  // sync: the first step waits for this many trainers (0: all of them)
  int standby_masters = 0;
  std::string mode = "sync";
  std::string optimizer = spec::kDefaultOptimizer;
  int passes = 1;
  double checkpoint_every = 0;  // pserver checkpoints every S seconds (0: none)
  std::string checkpoint_dir;   // where the pservers keep their checkpoints; empty: RUN/checkpoints
  // Sync: consistent checkpoints every N steps (the job's checkpoint steps). A pserver that is
  // lost then rolls the whole job back to the newest consistent checkpoint (model and data
  // position together), and --resume continues from it.
  int64_t checkpoint_steps = 0;
  // Copies of every shard (the job's replicas, 1..pservers): a lost pserver's shards are taken
  // over by their backups, without a rollback.
  int replicas = 1;
  // Elastic: the job has `pservers` shards and starts this many pserver processes (1..pservers);
  // `tessera local scale --pservers N` adds or removes processes while it runs, and shards move
  // between them live (0: not elastic, `pservers` processes).
  int start_pservers = 0;
  // Sync: a step closes once all but this many trainers pushed (JobConfig::backup_trainers).
  int backup_trainers = 0;
  // A gradient with NaN or infinity: "skip" (the step goes on without it) or "error" (see
  // NonFinitePolicy in job/job_config.h).
  std::string nonfinite = "skip";
  // Continue the job of an earlier run in `run_dir` (stopped or crashed): its etcd data, the
  // master's task position and the pservers' checkpoints are picked up where they are.
  bool resume = false;
  // Follow the data set: chunks appended to it (`tessera upload --append`) while the job runs
  // are trained on too, once each, in order, until `stop_following` is set; then the job ends
  // when the data it has is trained on. One pass.
  bool follow = false;
  int chunks_per_task = 0;  // 0: the master's choice (about 4 MiB of records a task)
  double task_timeout_s = 60;
  int max_failures = 3;
  int64_t lease_ttl_seconds = 10;
  // Data plane: what the pservers serve and the trainers use (TESSERA_TRANSPORT): auto, tcp,
  // shm or grpc.
  std::string transport = "auto";
  // Busy polling of the trainers and pservers (common/busy_poll.h), in microseconds; -1: the
  // environment's TESSERA_BUSY_POLL_US if set, else on when they fit the cores.
  int busy_poll_us = -1;
  // The etcd it starts requires credentials: a user of the job's own (job/job_access.h), whose
  // credentials file (<run>/etcd-credentials, mode 0600) every process gets; etcd's root user is
  // made with a random password that is used once and forgotten. Not with `etcd`.
  bool secure_etcd = false;
  // A file holding the wanted number of trainers (the platform writes it; the job may only read
  // it): a change of its number scales the job, as `tessera local scale --trainers` does.
  std::string scale_file;
  std::string model_out;    // default: <run>/model.tsm
  std::string tessera_bin;  // this program
  bool progress_tty = false;
};

// Where the pservers of `o` keep their checkpoints.
std::string CheckpointDirOf(const LocalOptions& o);

struct LocalResult {
  bool completed = false;  // every pass done, every trainer finished
  std::string metrics;     // final evaluation, for people
  std::string model_path;
};

// `stop`: stop everything now; `stop_following` (with LocalOptions::follow): take no more new
// data, finish the job with what it has.
StatusOr<LocalResult> RunLocal(const LocalOptions& options, const std::atomic<bool>* stop,
                               const std::atomic<bool>* stop_following = nullptr);

// `tessera local scale`: asks the supervisor of `run_dir` to run `trainers` trainers and (an
// elastic job) `pservers` pservers; an unset count is left as it is.
struct ScaleRequest {
  std::optional<int> trainers, pservers;
};
Status ScaleLocal(const std::string& run_dir, const ScaleRequest& request);

}  // namespace tessera::local
