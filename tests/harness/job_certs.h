// A job's TLS material as `tessera certs --job JOB --node node` writes it, made in process: the
// job's CA and one node certificate and key in `dir` as ca.pem, node.pem and node.key (the key
// 0600), for tests and benchmarks that run --tls jobs. Test-only.
#pragma once

#include <string>

#include "common/files.h"
#include "security/certs.h"
#include "tessera/status.h"

namespace tessera::testing {

inline Status WriteJobCerts(const std::string& dir, const std::string& job) {
  TESSERA_ASSIGN_OR_RETURN(security::Pem ca, security::MakeJobCa(job, 1));
  TESSERA_ASSIGN_OR_RETURN(security::Pem node, security::MakeNodeCert(ca, job, "node", {"127.0.0.1"}, 1));
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/ca.pem", ca.cert));
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/node.pem", node.cert));
  return WriteFileAtomic(dir + "/node.key", node.key, 0600);
}

}  // namespace tessera::testing
