// Connecting to a job as a client does: an etcd client from ConnectionOptions (credentials and
// TLS included), checked reachable, the job's configuration, and the secret its messages are
// signed with (from etcd or the options' secret file). Shared by the Client, the Reader, the
// Session, the exporter and the commands that call a job's master or pservers.
#pragma once

#include <chrono>
#include <memory>

#include "coord/etcd_client.h"
#include "job/job_config.h"
#include "security/job_secret.h"
#include "security/tls_config.h"
#include "tessera/connection.h"
#include "tessera/status.h"

namespace tessera {

struct JobConnection {
  std::unique_ptr<etcd::EtcdClient> etcd;
  JobConfig config;
  security::JobSecret secret;
  std::shared_ptr<const security::TlsConfig> tls;  // null: the job does not use TLS
};

// Validates the options, connects (failing after `connect_timeout` if no etcd endpoint accepts
// connections, saying why) and reads the job. NotFound for a job that does not exist;
// PermissionDenied when etcd refuses these credentials or the secret file is another job's.
StatusOr<JobConnection> ConnectJob(const ConnectionOptions& options,
                                   std::chrono::milliseconds connect_timeout);

}  // namespace tessera
