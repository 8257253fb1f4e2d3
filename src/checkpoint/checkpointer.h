// Checkpointer: saves a pserver's shard to the checkpoint directory and records it in etcd, and
// finds and loads the checkpoint to start from. The I/O shell around checkpoint_file (the bytes)
// and checkpoint_choice (the decision).
//
// Save: the file is written and fsynced under a new UUID name first; only then is the record at
// /tessera/<job>/checkpoints/<idx> replaced, in one transaction that also requires that this
// pserver still holds its index (its registration's create revision is `epoch`), so a pserver
// that was replaced while it stalled records nothing. The newest two checkpoints stay; files of
// this index no kept record names are deleted after the record moved on.
//
// Incremental checkpoints: a delta (Checkpoint::shard.delta) builds on the last checkpoint this
// checkpointer recorded or loaded; its record lists the chain of files it needs, base first,
// each with its digest. chain() tells the shard what a delta would build on (delta_policy.h).
//
// Load: reads the record, deletes this index's files that no record names (written by a pserver
// that died before recording them), checks every file of each record's chain (exists, SHA-256
// matches), and loads the newest record whose chain is good, applying its deltas to its base in
// order; each one passed over is logged with the reason.
//
// Thread-safety: one thread at a time (the pserver's checkpoint thread, or start-up).
#pragma once

#include <optional>
#include <string>

#include "checkpoint/checkpoint_choice.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/delta_policy.h"
#include "coord/etcd_client.h"

namespace tessera {

class Checkpointer {
 public:
  Checkpointer(etcd::EtcdClient* etcd, std::string job, int index, int64_t epoch, std::string dir);

  // Writes and records `c`. FailedPrecondition if this pserver no longer holds its index, or if
  // `c` is a delta that does not build on the last checkpoint recorded here (its generation
  // must follow that one's).
  StatusOr<CheckpointRecord> Save(Checkpoint c);

  // The newest good checkpoint of this index (whole: any deltas applied), or none (no record,
  // or nothing usable).
  StatusOr<std::optional<Checkpoint>> LoadLatest();
  // The shard now holds exactly what LoadLatest returned, at checkpoint generation `gen`: deltas
  // may build on it.
  void Continue(int64_t gen);

  // What the next delta would build on (gen -1: nothing; the next checkpoint must be whole).
  CheckpointChainState chain() const;

  const std::string& dir() const { return dir_; }

 private:
  void Prune(const std::vector<CheckpointRecord>& keep);
  // Reads `record`'s files and applies its deltas to its base. DataLoss naming the file at fault
  // (`bad` is set to its uuid).
  StatusOr<Checkpoint> ReadChain(const CheckpointRecord& record, std::string* bad);

  etcd::EtcdClient* etcd_;
  std::string job_;
  int index_;
  int64_t epoch_;
  std::string dir_;
  std::optional<CheckpointRecord> head_;    // the last recorded here, what a delta builds on
  int64_t head_gen_ = -1;                   // the shard's generation that head_ holds
  std::optional<CheckpointRecord> loaded_;  // the last LoadLatest's, until Continue
};

}  // namespace tessera
