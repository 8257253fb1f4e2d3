// TLS material for the benchmarks: a CA and one node certificate for job "bench" (as `tessera
// certs` makes them), written to a directory as ca.pem, node.pem and node.key, and read back
// as a TlsConfig. Bench-only.
#pragma once

#include <memory>
#include <string>

#include "common/files.h"
#include "security/certs.h"
#include "security/tls_config.h"

namespace tessera::bench {

inline constexpr char kTlsJob[] = "bench";

inline Status WriteBenchCerts(const std::string& dir) {
  TESSERA_ASSIGN_OR_RETURN(security::Pem ca, security::MakeJobCa(kTlsJob, 1));
  TESSERA_ASSIGN_OR_RETURN(security::Pem node, security::MakeNodeCert(ca, kTlsJob, "node", {"127.0.0.1"}, 1));
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/ca.pem", ca.cert));
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/node.pem", node.cert));
  return WriteFileAtomic(dir + "/node.key", node.key, 0600);
}

inline StatusOr<std::shared_ptr<const security::TlsConfig>> LoadBenchTls(const std::string& dir) {
  return security::TlsConfig::Load(kTlsJob, dir + "/ca.pem", dir + "/node.pem", dir + "/node.key");
}

}  // namespace tessera::bench
