// Shared etcd flags for `tessera` subcommands (see etcd_flags.h).
#include "cli/etcd_flags.h"

#include <cstdio>

#include "common/flag_names.h"
#include "common/strings.h"
#include "coord/connection.h"

namespace tessera::cli {

void AddEtcdFlags(CLI::App* cmd, EtcdFlags* f, bool need_job) {
  cmd->add_option(flags::kEtcd, f->endpoints, "etcd endpoints, host:port[,host:port...]")
      ->envname(flags::kEnvEtcd)
      ->required();
  auto* job = cmd->add_option(flags::kJob, f->job, "job name")->envname(flags::kEnvJob);
  if (need_job) job->required();
  cmd->add_option("--etcd-user", f->user, "etcd user name (enables auth)")->envname(flags::kEnvEtcdUser);
  cmd->add_option("--etcd-password", f->password, "etcd password")->envname(flags::kEnvEtcdPassword);
  cmd->add_option("--etcd-credentials", f->credentials,
                  "file of user= and password= lines for etcd (as `job create --secure` writes)")
      ->envname(flags::kEnvEtcdCredentials);
  cmd->add_flag("--etcd-tls", f->tls, "connect to etcd over TLS")->envname(flags::kEnvEtcdTls);
  cmd->add_option("--etcd-ca", f->ca, "PEM file of CA certificates for etcd TLS")->envname(flags::kEnvEtcdCa);
  cmd->add_option("--etcd-cert", f->cert, "PEM client certificate for etcd TLS")
      ->envname(flags::kEnvEtcdCert);
  cmd->add_option("--etcd-key", f->key, "PEM client key for etcd TLS")->envname(flags::kEnvEtcdKey);
  cmd->add_option(flags::kSecretFile, f->secret_file,
                  "the job's secret from this file (mode 0600) instead of from etcd")
      ->envname(flags::kEnvJobSecretFile);
  cmd->add_option("--tls-ca", f->tls_ca, "a --tls job's CA certificate (PEM; `tessera certs` makes it)")
      ->envname(flags::kEnvTlsCa);
  cmd->add_option("--tls-cert", f->tls_cert, "this node's certificate for a --tls job (PEM)")
      ->envname(flags::kEnvTlsCert);
  cmd->add_option("--tls-key", f->tls_key, "this node's private key for a --tls job (PEM, mode 0600)")
      ->envname(flags::kEnvTlsKey);
  cmd->add_option("--etcd-timeout", f->timeout_s, "seconds an etcd call keeps retrying")
      ->capture_default_str();
}

StatusOr<ConnectionOptions> ConnectionFromFlags(const EtcdFlags& f) {
  if (!f.job.empty()) TESSERA_RETURN_IF_ERROR(ValidateName(f.job, "job"));
  ConnectionOptions c;
  TESSERA_ASSIGN_OR_RETURN(c.etcd_endpoints, ParseEndpoints(f.endpoints));
  c.job = f.job;
  c.etcd_username = f.user;
  c.etcd_password = f.password;
  c.etcd_tls = f.tls;
  c.etcd_ca_file = f.ca;
  c.etcd_cert_file = f.cert;
  c.etcd_key_file = f.key;
  c.secret_file = f.secret_file;
  c.etcd_credentials_file = f.credentials;
  c.tls_ca_file = f.tls_ca;
  c.tls_cert_file = f.tls_cert;
  c.tls_key_file = f.tls_key;
  if (c.etcd_cert_file.empty() != c.etcd_key_file.empty()) {
    return Status::InvalidArgument("--etcd-cert and --etcd-key go together");
  }
  if (!c.etcd_credentials_file.empty() && !c.etcd_username.empty()) {
    return Status::InvalidArgument("--etcd-user and --etcd-credentials: give one or the other");
  }
  return c;
}

StatusOr<etcd::EtcdOptions> EtcdOptionsFromFlags(const EtcdFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(ConnectionOptions c, ConnectionFromFlags(f));
  return EtcdOptionsFor(c);
}

StatusOr<std::unique_ptr<etcd::EtcdClient>> ConnectEtcd(const EtcdFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(etcd::EtcdOptions o, EtcdOptionsFromFlags(f));
  o.retry_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  o.request_timeout = std::min(o.request_timeout, o.retry_timeout);
  TESSERA_ASSIGN_OR_RETURN(auto client, etcd::EtcdClient::Create(o));
  // A one-shot command fails at once when nothing is there, saying why (a wrong address, a typo
  // in a host name, etcd not started) instead of retrying for the whole --etcd-timeout.
  TESSERA_RETURN_IF_ERROR(client->CheckReachable(std::chrono::seconds(2)));
  return client;
}

int Fail(const std::string& cmd, const Status& status) {
  // Messages may quote a child's log: keep its lines, drop control characters (escape sequences
  // of progress bars and the like).
  std::string msg = status.message();
  for (char& c : msg) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') c = ' ';
  }
  std::fprintf(stderr, "tessera %s: %s\n", cmd.c_str(), msg.c_str());
  return 1;
}

}  // namespace tessera::cli
