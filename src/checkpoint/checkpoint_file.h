// Checkpoint files: one pserver's shard (declarations, dense blocks and sparse rows with their
// optimizer state) at one version, in one self-checking file. Written by the pserver's
// checkpointer, read when a pserver claims an index that has a recorded checkpoint, and by tests.
//
// Layout: "TSCK", then (varints and length-prefixed strings, see common/bytes.h) the format
// number, job, pserver index, version, creation time, whether it is a delta and the uuid of the
// file it applies on (format 3), the declarations (optimizer, initializer and limits as their wire
// protos), every dense block (param, block, update count, floats) and every sparse table (param,
// keys, per-row update counts (adam only; else empty), rows, the limits' bookkeeping (per-row
// last updates, the table's update count, the admission sketch, counts) and a delta's removed
// keys), then "TSCKEND" and the SHA-256 (hex) of all before it. Floats and integers in arrays are
// little-endian. A delta holds only the sparse rows changed since the file it applies on
// (checkpoint_delta.h); the rest is whole.
//
// Writing goes to a new file named by a UUID, fsynced with its directory before it is visible
// under its final name, so a crash at any moment leaves either no file or a whole one. The
// digest recorded in etcd is the SHA-256 of the whole file. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_probe.h"
#include "checkpoint/shard_snapshot.h"
#include "tessera/status.h"

namespace tessera {

struct Checkpoint {
  std::string job;
  int index = 0;
  int64_t version = 0;
  int64_t created_ms = 0;
  ShardSnapshot shard;  // shard.delta: a delta on the checkpoint `parent`
  std::string parent;   // a delta's: the uuid of the file it applies on
  int64_t gen = 0;      // not saved: the shard's checkpoint generation of the copy
};

std::string EncodeCheckpoint(const Checkpoint& c);
// DataLoss naming `what` (e.g. the file) and the first thing wrong.
StatusOr<Checkpoint> DecodeCheckpoint(std::string_view bytes, const std::string& what);

struct WrittenCheckpoint {
  std::string uuid;
  std::string path;
  std::string digest;  // SHA-256 (hex) of the whole file
  int64_t bytes = 0;
};

// Writes `c` to CheckpointPath(dir, job, index, new uuid) durably (see above).
StatusOr<WrittenCheckpoint> WriteCheckpoint(const std::string& dir, const Checkpoint& c);

// Reads and checks a checkpoint file: NotFound if missing, DataLoss if its SHA-256 is not
// `digest` (when given) or it does not decode.
StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, const std::string& digest);

}  // namespace tessera
