// ConnectionOptions: how a process reaches a job — etcd's endpoints and credentials, the job's
// name, and where its secret comes from. One struct read once (from the caller, then the
// TESSERA_* environment) and passed to every part that talks to etcd or a pserver: the Client,
// the Reader, the Session behind the Python module and the C API, and every `tessera` command.
//
// Environment (each fills its field only when the field is empty):
//   TESSERA_ETCD             host:port[,host:port...]
//   TESSERA_JOB              the job's name
//   TESSERA_ETCD_USER        etcd user (enables etcd authentication)
//   TESSERA_ETCD_PASSWORD    its password
//   TESSERA_ETCD_CREDENTIALS a file (mode 0600) of "user=..." and "password=..." lines, as
//                            `tessera job create --secure` writes for the job's own etcd user
//   TESSERA_ETCD_TLS         1/true: https to etcd (implied by TESSERA_ETCD_CA)
//   TESSERA_ETCD_CA          PEM file of the CA certificates etcd's certificate must chain to
//   TESSERA_ETCD_CERT        PEM client certificate for etcd (mutual TLS)
//   TESSERA_ETCD_KEY         its PEM private key
//   TESSERA_JOB_SECRET_FILE  the job's secret from this file (mode 0600) instead of from etcd
//   TESSERA_TLS_CA, TESSERA_TLS_CERT, TESSERA_TLS_KEY
//                            the job's CA and this node's certificate and key, for a job created
//                            with --tls (`tessera certs` makes them)
// A value type; thread-safe as values are.
#pragma once

#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

struct ConnectionOptions {
  std::vector<std::string> etcd_endpoints;   // host:port of each etcd member; required
  std::string job;                           // required
  std::string etcd_username, etcd_password;  // empty user: no etcd authentication
  std::string etcd_credentials_file;         // user and password from this file instead
  bool etcd_tls = false;                     // https to etcd (set by a CA file too)
  std::string etcd_ca_file, etcd_cert_file, etcd_key_file;
  // The job's secret (docs/security.md) is read from etcd beside the job's configuration unless a
  // file is given here; a file holding another job's secret is refused.
  std::string secret_file;
  // Mutual TLS toward the job's master and pservers (a job created with --tls needs them).
  std::string tls_ca_file, tls_cert_file, tls_key_file;

  // Fills every empty field from its TESSERA_* variable. InvalidArgument for a value that cannot
  // be right (TESSERA_ETCD_TLS=maybe).
  Status FillFromEnvironment();
  // InvalidArgument naming what is missing or malformed (no endpoint, a bad job name, a client
  // certificate without its key).
  Status Validate() const;
  // "host:port,host:port" (TESSERA_ETCD's form) as etcd_endpoints, empty parts dropped; and back.
  void SetEtcd(const std::string& comma_separated);
  std::string EtcdText() const;
};

}  // namespace tessera
