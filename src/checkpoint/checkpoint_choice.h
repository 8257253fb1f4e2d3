// Which checkpoint a pserver loads when it claims an index: a pure decision over what etcd
// records (the last checkpoints, newest first) and what was found on disk for each of their files
// (missing, corrupt, good). No files, no etcd inside: the pserver probes the files and records, this
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

// One file of an incremental checkpoint's chain: a base, or a delta on the file before it.
struct CheckpointLink {
  std::string uuid;
  std::string digest;  // SHA-256 (hex) of the file
  int64_t version = 0;
  int64_t bytes = 0;
  bool operator==(const CheckpointLink&) const = default;
};

// A recorded checkpoint: its own file (a whole shard when `chain` is empty, else a delta of the
// sparse rows changed since the last file of `chain`), and the files it builds on, base first.
struct CheckpointRecord {
  std::string uuid;
  std::string digest;  // SHA-256 (hex) of the file
  int64_t version = 0;
  int64_t time_ms = 0;
  int64_t bytes = 0;  // the file's size (0: not recorded)
  std::vector<CheckpointLink> chain;
  bool operator==(const CheckpointRecord&) const = default;

  bool delta() const { return !chain.empty(); }
  // Every file to read, base first, this record's own last.
  std::vector<CheckpointLink> Files() const;
  // For the log: "whole, 12 MiB" or "delta 3 on the base of version 40, 1.2 MiB".
  std::string Describe() const;
};

// The etcd value: {"checkpoints": [{uuid, digest, version, time_ms, bytes, chain}, ...]}, newest
// first; "chain" ([{uuid, digest, version, bytes}, ...], base first) only for a delta.
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

// The state of a record's chain: good if every file is, else the first file that is not (base
// first), with a description of it ("its file", "its base <uuid>", "its delta <uuid> (version V)").
struct ChainFileState {
  CheckpointFileState state = CheckpointFileState::kGood;
  std::string which;
};
ChainFileState StateOfChain(const CheckpointRecord& record,
                            const std::map<std::string, CheckpointFileState>& files);

// Picks the newest (highest version, then latest time) record whose files are all good.
// `files` maps a file's uuid to what was found; a uuid not in it counts as missing.
CheckpointChoice ChooseCheckpoint(const std::vector<CheckpointRecord>& records,
                                  const std::map<std::string, CheckpointFileState>& files);

}  // namespace tessera
