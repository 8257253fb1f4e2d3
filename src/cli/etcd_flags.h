// Flags every etcd-using `tessera` subcommand shares (--etcd, --job, etcd auth and TLS, the job's
// secret file), with their environment-variable equivalents (tessera/connection.h), and the
// ConnectionOptions and EtcdOptions they become. Used only by src/cli.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "coord/etcd_client.h"
#include "tessera/connection.h"
#include "tessera/status.h"

namespace tessera::cli {

struct EtcdFlags {
  std::string endpoints;  // --etcd / TESSERA_ETCD
  std::string job;        // --job / TESSERA_JOB
  std::string user;       // --etcd-user / TESSERA_ETCD_USER
  std::string password;   // --etcd-password / TESSERA_ETCD_PASSWORD
  bool tls = false;       // --etcd-tls
  std::string ca, cert, key;
  std::string credentials;                // --etcd-credentials / TESSERA_ETCD_CREDENTIALS
  std::string secret_file;                // --secret-file / TESSERA_JOB_SECRET_FILE
  std::string tls_ca, tls_cert, tls_key;  // --tls-ca/--tls-cert/--tls-key / TESSERA_TLS_*
  double timeout_s = 20;                  // --etcd-timeout: how long a call retries before giving up
};

// Adds the flags to `cmd`. `need_job`: --job is required.
void AddEtcdFlags(CLI::App* cmd, EtcdFlags* flags, bool need_job = true);

// Validates the flags (endpoints, job name) and turns them into connection options.
StatusOr<ConnectionOptions> ConnectionFromFlags(const EtcdFlags& flags);
// The same, as etcd client options.
StatusOr<etcd::EtcdOptions> EtcdOptionsFromFlags(const EtcdFlags& flags);

// Validates the flags and creates a client (no network I/O yet).
StatusOr<std::unique_ptr<etcd::EtcdClient>> ConnectEtcd(const EtcdFlags& flags);

// Prints "tessera <cmd>: <message>" on one line to stderr and returns exit code 1.
int Fail(const std::string& cmd, const Status& status);

}  // namespace tessera::cli
