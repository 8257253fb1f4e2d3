// Reading a job from etcd (see job_store.h).
#include "job/job_store.h"

#include "coord/keys.h"

namespace tessera {

StatusOr<JobConfig> LoadJobConfig(etcd::EtcdClient* etcd, const std::string& job) {
  TESSERA_ASSIGN_OR_RETURN(auto kv, etcd->Get(keys::Config(job)));
  if (kv.kvs.empty()) {
    return Status::NotFound("job '" + job + "' does not exist in etcd at " + etcd->endpoints() +
                            " (create it with `tessera job create`)");
  }
  return JobConfig::FromJson(kv.kvs[0].value);
}

StatusOr<SlotMap> LoadSlotMap(etcd::EtcdClient* etcd, const std::string& job) {
  TESSERA_ASSIGN_OR_RETURN(auto kv, etcd->Get(keys::SlotMap(job)));
  if (kv.kvs.empty()) return Status::DataLoss("job '" + job + "' has a configuration but no slot map");
  return SlotMap::FromJson(kv.kvs[0].value);
}

etcd::Txn CreateJobTxn(const std::string& job, JobConfig* config, const security::JobSecret& secret,
                       std::vector<etcd::Op> extra) {
  config->secret_fingerprint = secret.Fingerprint();
  etcd::Txn txn;
  txn.compares.push_back(etcd::Compare::Absent(keys::Config(job)));
  txn.success.push_back(etcd::Op::Put(keys::Config(job), config->ToJson()));
  txn.success.push_back(
      etcd::Op::Put(keys::SlotMap(job), SlotMap::RoundRobin(config->slots, config->pservers).ToJson()));
  if (!secret.empty()) txn.success.push_back(etcd::Op::Put(keys::Secret(job), secret.Text()));
  for (auto& op : extra) txn.success.push_back(std::move(op));
  return txn;
}

StatusOr<std::shared_ptr<const security::TlsConfig>> LoadJobTls(const std::string& job,
                                                                const JobConfig& config,
                                                                const std::string& ca_file,
                                                                const std::string& cert_file,
                                                                const std::string& key_file) {
  const bool given = !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  if (!config.tls) {
    if (given) {
      return Status::InvalidArgument("job '" + job +
                                     "' does not use TLS (it was created without --tls): drop "
                                     "--tls-ca, --tls-cert and --tls-key");
    }
    return std::shared_ptr<const security::TlsConfig>();
  }
  if (!given) {
    return Status::InvalidArgument(
        "job '" + job +
        "' speaks TLS: give its CA and this node's certificate and key "
        "(--tls-ca, --tls-cert, --tls-key or TESSERA_TLS_CA, _CERT, _KEY; `tessera "
        "certs` makes them)");
  }
  return security::TlsConfig::Load(job, ca_file, cert_file, key_file);
}

StatusOr<security::JobSecret> LoadJobSecret(etcd::EtcdClient* etcd, const std::string& job,
                                            const JobConfig& config, const std::string& secret_file) {
  if (!secret_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(security::JobSecret s, security::JobSecret::FromFile(secret_file));
    if (s.Fingerprint() != config.secret_fingerprint) {
      return Status::Unauthenticated("the secret in " + secret_file + " (fingerprint " + s.Fingerprint() +
                                     ") is not job '" + job + "'s" +
                                     (config.secret_fingerprint.empty()
                                          ? " (the job has none)"
                                          : " (" + config.secret_fingerprint + ")"));
    }
    return s;
  }
  if (config.secret_fingerprint.empty()) return security::JobSecret();
  auto kv = etcd->Get(keys::Secret(job));
  if (!kv.ok()) {
    if (kv.status().code() == StatusCode::kPermissionDenied) {
      return Status::PermissionDenied(
          "etcd refuses this user job '" + job + "'s secret at " + keys::Secret(job) +
          " (use the job's etcd user, see `tessera job create --secure`): " + kv.status().message());
    }
    return kv.status();
  }
  if (kv->kvs.empty()) {
    return Status::DataLoss("job '" + job + "' has a secret (fingerprint " + config.secret_fingerprint +
                            ") but nothing at " + keys::Secret(job));
  }
  auto s = security::JobSecret::FromText(kv->kvs[0].value);
  if (!s.ok()) return s.status().WithContext(keys::Secret(job));
  if (s->Fingerprint() != config.secret_fingerprint) {
    return Status::DataLoss("the secret at " + keys::Secret(job) + " does not match job '" + job +
                            "'s configuration (fingerprint " + s->Fingerprint() + ", not " +
                            config.secret_fingerprint + ")");
  }
  return s;
}

}  // namespace tessera
