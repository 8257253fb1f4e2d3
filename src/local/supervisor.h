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

// The job of a local run as `tessera local` describes it when no spec is given: the spec's
// defaults but for its name ("local"), one master (no standbys) and no timed checkpoints.
spec::JobSpec LocalJobSpec();

// A local run: the job (the same spec that `tessera launch`, `deploy k8s` and the platform take;
// `tessera local`'s flags are overrides of its fields) and how it runs on this machine. Of the
// spec, the cluster's own fields (image, namespace, resources, ports, etcd members, volumes'
// claims) are not used; an empty checkpoints.path means RUN/checkpoints; etcd_endpoints, when
// given, name an etcd to use instead of starting one; a trainer's own command is run as is
// (`--trainer-cmd` gives it as /bin/sh -c CMD).
struct LocalOptions {
  spec::JobSpec spec = LocalJobSpec();
  std::string run_dir;
  // Continue the job of an earlier run in `run_dir` (stopped or crashed): its etcd data, the
  // master's task position and the pservers' checkpoints are picked up where they are.
  bool resume = false;
  // Follow the data set: chunks appended to it (`tessera upload --append`) while the job runs
  // are trained on too, once each, in order, until `stop_following` is set; then the job ends
  // when the data it has is trained on. One pass.
  bool follow = false;
  // Busy polling of the trainers and pservers (common/busy_poll.h), in microseconds; -1: the
  // environment's TESSERA_BUSY_POLL_US if set, else on when they fit the cores.
  int busy_poll_us = -1;
  // The etcd it starts requires credentials: a user of the job's own (job/job_access.h), whose
  // credentials file (<run>/etcd-credentials, mode 0600) every process gets; etcd's root user is
  // made with a random password that is used once and forgotten. Not with an etcd given.
  bool secure_etcd = false;
  // A file holding the wanted number of trainers (the platform writes it; the job may only read
  // it): a change of its number scales the job, as `tessera local scale --trainers` does.
  std::string scale_file;
  std::string model_out;    // default: <run>/model.tsm
  std::string tessera_bin;  // this program
  bool progress_tty = false;

  // The etcd given to use (host:port[,host:port...]); empty: start one in the run directory.
  std::string given_etcd() const;
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
