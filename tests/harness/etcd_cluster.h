// EtcdCluster: an etcd cluster of several members on loopback, for benchmarks and tests that
// need a quorum (bench/scale_sim's three-member runs). Every member is started before any is
// waited for (a lone member of a cluster answers nothing until a quorum is up). Test-only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/subprocess.h"
#include "tessera/status.h"

namespace tessera::testing {

struct EtcdClusterOptions {
  int members = 3;
  std::vector<std::string> flags;  // more flags for every member (e.g. spec::EtcdServerFlags())
};

class EtcdCluster {
 public:
  // Starts every member and waits (up to 60 s) until the cluster takes a write.
  static StatusOr<std::unique_ptr<EtcdCluster>> Launch(EtcdClusterOptions options);
  ~EtcdCluster();  // kills every member and removes the data

  // Each member's client endpoint, host:port.
  std::vector<std::string> endpoints() const;
  std::vector<pid_t> pids() const;
  const std::string& dir() const { return dir_; }

 private:
  EtcdCluster() = default;
  std::string dir_;
  std::vector<int> client_ports_;
  std::vector<std::unique_ptr<Subprocess>> members_;
};

}  // namespace tessera::testing
