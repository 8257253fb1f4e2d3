// A job's records in etcd: the transaction that creates one (configuration, slot map and a new
// secret, at once), and reading them back with the errors every reader should give: NotFound
// naming the job and the etcd endpoints for a job that does not exist, DataLoss for one without
// a slot map, PermissionDenied for a secret this process may not have. Used by `tessera job
// create`, `tessera local`, the pserver, master, client, reader, exporter and session.
#pragma once

#include <string>
#include <vector>

#include "coord/etcd_client.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "security/job_secret.h"
#include "security/tls_config.h"

namespace tessera {

StatusOr<JobConfig> LoadJobConfig(etcd::EtcdClient* etcd, const std::string& job);
StatusOr<SlotMap> LoadSlotMap(etcd::EtcdClient* etcd, const std::string& job);

// The transaction that creates `job` if it does not exist: `config` (its secret_fingerprint set
// here), a round-robin slot map and `secret` (JobSecret::Generate() unless given), plus `extra`
// puts. Commit it and check `succeeded` (false: the job exists).
etcd::Txn CreateJobTxn(const std::string& job, JobConfig* config, const security::JobSecret& secret,
                       std::vector<etcd::Op> extra = {});

// The secret this process uses for `job`: read from `secret_file` if one is given (it must be the
// job's: its fingerprint is checked against the configuration), else from etcd beside the
// configuration. Empty for a job without one. PermissionDenied, saying what to do, when the
// secret cannot be read (etcd refuses this user) or the file holds another job's.
// The TLS material this process uses for `job`: null for a job without TLS; the loaded files for
// one with (InvalidArgument saying which flags to give when they are missing, or given to a job
// without TLS).
StatusOr<std::shared_ptr<const security::TlsConfig>> LoadJobTls(const std::string& job,
                                                                const JobConfig& config,
                                                                const std::string& ca_file,
                                                                const std::string& cert_file,
                                                                const std::string& key_file);

StatusOr<security::JobSecret> LoadJobSecret(etcd::EtcdClient* etcd, const std::string& job,
                                            const JobConfig& config, const std::string& secret_file = "");

}  // namespace tessera
