// Checkpoint file names and probes (see checkpoint_probe.h).
#include "checkpoint/checkpoint_probe.h"

#include <filesystem>

#include "common/digest.h"

namespace tessera {

std::string CheckpointPath(const std::string& dir, const std::string& job, int index,
                           const std::string& uuid) {
  return dir + "/" + job + "-ps" + std::to_string(index) + "-" + uuid + ".tsck";
}

CheckpointFileState ProbeCheckpointFile(const std::string& path, const std::string& digest) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return CheckpointFileState::kMissing;
  auto sha = Sha256File(path);
  return sha.ok() && *sha == digest ? CheckpointFileState::kGood : CheckpointFileState::kCorrupt;
}

std::map<std::string, CheckpointFileState> ProbeCheckpointFiles(
    const std::string& dir, const std::string& job, int index, const std::vector<CheckpointRecord>& records) {
  std::map<std::string, CheckpointFileState> files;
  for (const auto& r : records)
    for (const auto& f : r.Files())
      if (!files.count(f.uuid))
        files[f.uuid] = ProbeCheckpointFile(CheckpointPath(dir, job, index, f.uuid), f.digest);
  return files;
}

}  // namespace tessera
