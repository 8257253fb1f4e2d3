// CheckpointView: what the console shows of a pserver's checkpoints. It takes the records etcd
// holds for the pserver and adds to each a "digest_state": "verified", "digest mismatch" or
// "file missing" (for a delta, of the first bad file of its chain: "base: file missing") where
// this master can see the pserver's checkpoint directory (a shared file system, or the same
// machine), else "not visible from the master". A recorded file never
// changes, so each uuid is hashed once and its state remembered. Used by the master's console;
// thread-safe (no lock is held while a file is hashed).
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera::master {

class CheckpointView {
 public:
  // `records_value`: the etcd value of /tessera/<job>/checkpoints/<index>; `dir`: the pserver's
  // --checkpoint-dir from its registration ("" when it has none). Returns the record list (an
  // empty array when the value is unreadable).
  nlohmann::json Records(const std::string& job, int index, const std::string& records_value,
                         const std::string& dir);

 private:
  std::string State(const std::string& job, int index, const std::string& dir, const std::string& uuid,
                    const std::string& digest);

  std::mutex mu_;
  std::map<std::string, std::string> states_;  // uuid -> a state that cannot change any more
};

}  // namespace tessera::master
