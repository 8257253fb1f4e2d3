// Where a pserver's checkpoint files live and what state each is in (missing, corrupt, good),
// for everyone who looks at them: the pserver choosing which to load (checkpointer.cc), the
// supervisor choosing a rollback version (local/rollback.cc) and the master's console. Reads
// files; no etcd. Thread-safe (no shared state).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_choice.h"

namespace tessera {

// The file of checkpoint `uuid` of pserver `index` of `job` in `dir`:
// "<dir>/<job>-ps<index>-<uuid>.tsck".
std::string CheckpointPath(const std::string& dir, const std::string& job, int index, const std::string& uuid);

// kMissing if `path` does not exist, kGood if its SHA-256 (hex) is `digest`, kCorrupt otherwise
// (including a file that cannot be read).
CheckpointFileState ProbeCheckpointFile(const std::string& path, const std::string& digest);

// The state of every file the records name (their own and their chains'), each probed once, by
// uuid: what ChooseCheckpoint and StateOfChain take.
std::map<std::string, CheckpointFileState> ProbeCheckpointFiles(const std::string& dir, const std::string& job,
                                                                 int index,
                                                                 const std::vector<CheckpointRecord>& records);

}  // namespace tessera
