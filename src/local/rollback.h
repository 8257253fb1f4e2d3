// Rollback of a sync job with consistent checkpoints (the job's checkpoint steps > 0): picks the
// newest version that every pserver holds a good checkpoint of and whose data position the
// master saved, then, in one etcd transaction, drops the checkpoint records and positions newer
// than it (so every pserver loads exactly that version) and writes the rollback order that the
// next leading master applies to its task queue. The pure choice is master::ChooseRollbackVersion.
//
// Called by `tessera local` (on --resume, and when a pserver of such a job is lost) while none of
// the job's pservers, masters or trainers runs. Thread-safe as its etcd client is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera::local {

struct Rollback {
  int64_t version = 0;
  int64_t generation = 0;
  std::string note;  // what was passed over, for the log
};

// `checkpoint_dir`: where the checkpoint files are, to check them (empty: trust the records).
// None if the job has no checkpoint steps, or nothing consistent to roll back to; then
// `passed_over` (if not null) says which checkpoints were passed over and why (Rollback::note).
StatusOr<std::optional<Rollback>> PrepareRollback(etcd::EtcdClient* etcd, const std::string& job,
                                                  const std::string& checkpoint_dir,
                                                  std::string* passed_over = nullptr);

// Revokes every lease attached to a key of `job` (registrations, readiness, election), so a
// replacement claims the same index at once. Only when none of the job's processes runs.
Status RevokeJobLeases(etcd::EtcdClient* etcd, const std::string& job);

}  // namespace tessera::local
