// Which checkpoint a pserver loads when it claims an index: a pure decision over what etcd
// records (the last checkpoints, newest first) and what was found on disk for each (missing,
// corrupt, good). No files, no etcd inside: the pserver probes the files and records, this
// decides, and every refusal comes back with a reason to log. Also encodes the etcd record
// ("/tessera/<job>/checkpoints/<idx>"). Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

struct CheckpointRecord {
  std::string uuid;
  std::string digest;  // SHA-256 (hex) of the file
  int64_t version = 0;
  int64_t time_ms = 0;
  int64_t bytes = 0;  // the file's size (0: not recorded)
  bool operator==(const CheckpointRecord&) const = default;
};

// The etcd value: {"checkpoints": [{uuid, digest, version, time_ms, bytes}, ...]}, newest first.
std::string EncodeCheckpointRecords(const std::vector<CheckpointRecord>& records);
StatusOr<std::vector<CheckpointRecord>> DecodeCheckpointRecords(const std::string& value);

// The records after a new checkpoint: it goes first, and only the newest `keep` stay.
std::vector<CheckpointRecord> WithNewCheckpoint(std::vector<CheckpointRecord> records, CheckpointRecord added,
                                                size_t keep = 2);

enum class CheckpointFileState { kMissing, kCorrupt, kGood };

struct CheckpointChoice {
  std::optional<CheckpointRecord> load;  // none: nothing usable (start empty, or re-initialize)
  std::vector<std::string> refused;      // one line per record passed over, saying why
};

// Picks the newest (highest version, then latest time) record whose file is good.
// `files` maps a record's uuid to what was found; a uuid not in it counts as missing.
CheckpointChoice ChooseCheckpoint(const std::vector<CheckpointRecord>& records,
                                  const std::map<std::string, CheckpointFileState>& files);

}  // namespace tessera
