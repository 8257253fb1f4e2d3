// ExportModel: reads every parameter of a job from its pservers (all shards merged) into a
// ModelFile: dense parameters block by block, sparse tables page by page. It does not register as
// a trainer, so it can run beside (or after) training without touching any barrier. The model is
// one consistent cut: in a sync job every pserver copies its shard at the same version (the
// file's step) and the export reads the copies while training goes on; in async and ssp each
// pserver's shard is copied at one moment.
#pragma once

#include <chrono>
#include <string>

#include "coord/etcd_client.h"
#include "security/job_secret.h"
#include "security/tls_config.h"
#include "tessera/model_file.h"
#include "tessera/status.h"

namespace tessera {

// `secret` and `tls`: the job's (job_connection.h); the pservers refuse requests without them.
StatusOr<models::ModelFile> ExportModel(etcd::EtcdClient* etcd, const std::string& job,
                                        const security::JobSecret& secret, std::chrono::milliseconds timeout,
                                        std::shared_ptr<const security::TlsConfig> tls = nullptr);

}  // namespace tessera
