// Certificates for a job's mutual TLS (`tessera certs`): a CA of the job's own, and a certificate
// per node signed by it, each with an EC P-256 key. Every node certificate names the job
// (DNS "tessera.<job>") beside the node's own names and addresses, and is good for both ends
// of a connection (serverAuth and clientAuth), so peers can require the job's CA and name and
// refuse any other certificate. PEM in and out; nothing is written here. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::security {

struct Pem {
  std::string cert;  // PEM certificate
  std::string key;   // PEM private key (PKCS#8)
};

// The DNS name every certificate of `job` carries, and peers check.
std::string JobTlsName(const std::string& job);

// A self-signed CA for `job`, valid `days`.
StatusOr<Pem> MakeJobCa(const std::string& job, int days);

// A node certificate signed by `ca`: subject CN `node`, subject alternative names JobTlsName(job),
// `node`, and each of `hosts` (an IP address or a DNS name). InvalidArgument for a CA that does
// not parse or a host that is neither.
StatusOr<Pem> MakeNodeCert(const Pem& ca, const std::string& job, const std::string& node,
                           const std::vector<std::string>& hosts, int days);

// The subject alternative names of a PEM certificate ("DNS:x", "IP:1.2.3.4"), and whether it
// chains to `ca_pem` (one level); for tests and `tessera certs --check`.
StatusOr<std::vector<std::string>> CertNames(const std::string& cert_pem);
StatusOr<bool> SignedBy(const std::string& cert_pem, const std::string& ca_pem);
// Whether the private key is the certificate's.
StatusOr<bool> KeyMatches(const std::string& cert_pem, const std::string& key_pem);

}  // namespace tessera::security
