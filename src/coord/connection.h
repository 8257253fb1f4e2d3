// The etcd client options a ConnectionOptions (include/tessera/connection.h) stands for, and the
// etcd credentials file a per-job user's password travels in; the struct's own methods are
// implemented beside this. Thread-safe.
#pragma once

#include <string>

#include "coord/etcd_client.h"
#include "tessera/connection.h"

namespace tessera {

// The user and password of an etcd credentials file (`tessera job create --secure`).
struct JobEtcdUser {
  std::string user;      // "tessera-job-<job>"
  std::string password;  // 32 random hex characters
};

// "user=...\npassword=...\n", mode 0600, written atomically.
Status WriteEtcdCredentials(const std::string& path, const JobEtcdUser& u);
// PermissionDenied if others may read it; InvalidArgument naming the file if it is malformed.
StatusOr<JobEtcdUser> ReadEtcdCredentials(const std::string& path);

// Reads the credentials file when one is given (its user and password win over the options').
StatusOr<etcd::EtcdOptions> EtcdOptionsFor(const ConnectionOptions& c);

}  // namespace tessera
