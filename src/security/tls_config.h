// A node's mutual-TLS material for a job (`tessera certs`): the job's CA, the node's certificate
// and key, read from PEM files and checked before anything listens or connects — the
// certificate must chain to the CA, name the job (DNS tessera.<job>) and match the key, and the
// key file must be readable by its owner only. Peers then accept only certificates the job's CA
// signed for the job's name (grpc_tls.h). Immutable once loaded; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "tessera/status.h"

namespace tessera::security {

struct TlsConfig {
  std::string job;
  std::string ca_pem, cert_pem, key_pem;

  // Reads and checks the three files; InvalidArgument / PermissionDenied naming the file and
  // what is wrong with it.
  static StatusOr<std::shared_ptr<const TlsConfig>> Load(const std::string& job, const std::string& ca_file,
                                                         const std::string& cert_file,
                                                         const std::string& key_file);
  // The name peers check (certs.h JobTlsName).
  std::string PeerName() const;
};

}  // namespace tessera::security
