// Checkpointer: saves a pserver's shard to the checkpoint directory and records it in etcd, and
// finds and loads the checkpoint to start from. The I/O shell around checkpoint_file (the bytes)
// and checkpoint_choice (the decision).
//
// Save: the file is written and fsynced under a new UUID name first; only then is the record at
// /tessera/<job>/checkpoints/<idx> replaced, in one transaction that also requires that this
// pserver still holds its index (its registration's create revision is `epoch`), so a pserver
// that was replaced while it stalled records nothing. The newest two checkpoints stay; older
// files of this index are deleted after the record moved on.
//
// Load: reads the record, deletes this index's files that no record names (written by a pserver
// that died before recording them), checks each named file (exists, SHA-256 matches), and loads
// the newest good one; each one passed over is logged with the reason.
//
// Thread-safety: one thread at a time (the pserver's checkpoint thread, or start-up).
#pragma once

#include <optional>
#include <string>

#include "coord/etcd_client.h"
#include "checkpoint/checkpoint_choice.h"
#include "pserver/checkpoint_file.h"

namespace tessera {

class Checkpointer {
 public:
  Checkpointer(etcd::EtcdClient* etcd, std::string job, int index, int64_t epoch, std::string dir);

  // Writes and records `c`. FailedPrecondition if this pserver no longer holds its index.
  StatusOr<CheckpointRecord> Save(const Checkpoint& c);

  // The newest good checkpoint of this index, or none (no record, or nothing usable).
  StatusOr<std::optional<Checkpoint>> LoadLatest();

  const std::string& dir() const { return dir_; }

 private:
  void Prune(const std::vector<CheckpointRecord>& keep);

  etcd::EtcdClient* etcd_;
  std::string job_;
  int index_;
  int64_t epoch_;
  std::string dir_;
};

}  // namespace tessera
