// JobConfig: a job's configuration, stored as JSON at /tessera/<job>/config, written once by
// `tessera job create` and read by every pserver and trainer.
// A value type; thread-safe as values are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "job/wire_format.h"
#include "tessera/params.h"
#include "tessera/status.h"

namespace tessera {

// What a trainer does with a gradient that holds a NaN or an infinity (found by the trainer before
// anything is sent). Either way the step goes on without that trainer's gradient on every
// pserver (an empty push), so all pservers stay at the same version and the job keeps moving.
//  - kSkip (the default): the push returns OK and says it was skipped; a rare bad batch (a
//    corrupt record, an overflow) does not end a long job. Skips are logged by the trainer and
//    every pserver and counted in /metrics and the console, and a run of them in a row (the
//    model has diverged) becomes an error all the same.
//  - kError: the push returns InvalidArgument naming the parameter and element; the trainer's
//    program decides (a built-in trainer exits, and its crash loop ends the job with the cause).
enum class NonFinitePolicy { kSkip, kError };
StatusOr<NonFinitePolicy> ParseNonFinitePolicy(std::string_view s);
const char* NonFinitePolicyName(NonFinitePolicy p);

struct JobConfig {
  int pservers = 1;              // number of pserver indices (0..pservers-1)
  int slots = 1024;              // hash slots that blocks and keys are placed on
  int64_t block_size = 1 << 16;  // elements per dense block (256 KiB of float32)
  ConsistencyMode mode;          // default: sync
  OptimizerConfig optimizer;     // default optimizer of parameters that name none
  int min_trainers = 1;          // sync: the first step waits for this many trainers
  // Sync only, 0 = off: every pserver with a checkpoint directory checkpoints at the versions
  // that are multiples of this (one consistent cut of the model), and every trainer reports its
  // data position at those steps, so the job can roll back to a model and data position that
  // belong together (docs/design-notes.md, "Consistent checkpoints").
  int64_t checkpoint_steps = 0;
  NonFinitePolicy nonfinite = NonFinitePolicy::kSkip;
  // How gradients and values travel between trainers and pservers (wire_format.h): float32, half
  // precision, or pushes sparsified (top-k) or as signs with error feedback on the trainer; for
  // every parameter, or per parameter named.
  WireChoice wire;
  std::string token;       // random; every data-plane message must carry it
  int64_t created_ms = 0;  // wall-clock creation time
  // JobSecret::Fingerprint of the job's secret (stored beside the configuration, job_store.h);
  // empty: the job has none and its messages are not authenticated (a job made before secrets).
  std::string secret_fingerprint;
  // The job's processes speak mutual TLS (gRPC: security/grpc_tls.h; TCP: transport/tls_stream.h); every
  // process needs the job's CA and a certificate of its own (`tessera certs`).
  bool tls = false;
  // Copies of every shard (pserver index), each on a different pserver process: the primary
  // serves trainers and forwards every change to the R-1 backups before it counts; a backup takes
  // over when the primary is lost (docs/design-notes.md, "Replicas"). 1..pservers.
  int replicas = 1;
  // Sync: backup trainers b. A step closes once all but b of its trainers pushed; a push that
  // comes later is dropped and its trainer goes on from the open step (a straggler does not hold
  // the job back). 0..min_trainers-1.
  int backup_trainers = 0;
  // Elastic pservers: the job starts on this many pserver processes and may grow to `pservers`
  // (the shards trainers see, each served by whichever process the replica map names) or shrink
  // to one; shards move between processes while it runs. 0: not elastic (one process per
  // shard, unless replicas > 1).
  int initial_pservers = 0;
  // Whether the pservers run as hosts of shards under a replica map (replicas or elastic).
  bool hosted() const { return replicas > 1 || initial_pservers > 0; }

  Status Validate() const;
  std::string ToJson() const;
  static StatusOr<JobConfig> FromJson(const std::string& json);
};

}  // namespace tessera
