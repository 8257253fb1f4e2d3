// Per-job etcd users (`tessera job create --secure`): a role that may read and write the job's
// key prefix (/tessera/<job>/) and nothing else, and a user with that role and a random
// password, for the job's own processes. Another job's user is refused every key of this job, the
// secret included. Made and removed with an administrator's (root) etcd client.
#pragma once

#include <string>

#include "coord/connection.h"
#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera {

std::string JobEtcdUserName(const std::string& job);

// Refuses, saying what to do, when etcd at `endpoints` answers a client without credentials
// (its authentication is off: per-job users would protect nothing).
Status CheckEtcdAuthEnabled(const etcd::EtcdOptions& admin_options);

// Creates the role (granted the job's prefix) and the user. AlreadyExists if the user exists.
StatusOr<JobEtcdUser> CreateJobEtcdUser(etcd::EtcdClient* admin, const std::string& job);
// Removes them; NotFound ones are fine.
Status DeleteJobEtcdUser(etcd::EtcdClient* admin, const std::string& job);

}  // namespace tessera
