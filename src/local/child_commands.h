// The command lines `tessera local` runs for each of its children (etcd, pservers, masters,
// trainers), built in one place from the supervisor's options.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "local/supervisor.h"

namespace tessera::local {

struct EtcdCommand {
  std::vector<std::string> argv;
  std::string endpoint;  // host:port clients use
};
// An etcd with its data in RUN/etcd, on two free loopback ports.
EtcdCommand EtcdArgv(const LocalOptions& o);

// The pserver of `index` (it claims that index and no other, so its log is named after what it
// serves). `with_checkpoints`: it keeps (and loads) checkpoints in RUN/checkpoints.
std::vector<std::string> PserverArgv(const LocalOptions& o, const std::string& etcd, bool with_checkpoints,
                                     int index);
std::vector<std::string> MasterArgv(const LocalOptions& o, const std::string& etcd);
// A built-in model's `tessera train`, or the user's command through /bin/sh.
std::vector<std::string> TrainerArgv(const LocalOptions& o);
// What a trainer learns from its environment (TESSERA_*, PYTHONPATH to find the module), and
// its share of the cores for its math libraries (common/math_threads.h) unless the user chose.
std::map<std::string, std::string> TrainerEnv(const LocalOptions& o, const std::string& etcd, int slot);

}  // namespace tessera::local
