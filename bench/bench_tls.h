// TLS material for the benchmarks: the certificates of job "bench" (written by
// harness/job_certs.h WriteJobCerts as ca.pem, node.pem and node.key), read back as a TlsConfig.
// Bench-only.
#pragma once

#include <memory>
#include <string>

#include "security/tls_config.h"

namespace tessera::bench {

inline constexpr char kTlsJob[] = "bench";

inline StatusOr<std::shared_ptr<const security::TlsConfig>> LoadBenchTls(const std::string& dir) {
  return security::TlsConfig::Load(kTlsJob, dir + "/ca.pem", dir + "/node.pem", dir + "/node.key");
}

}  // namespace tessera::bench
