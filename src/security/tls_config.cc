// TlsConfig (see tls_config.h).
#include "security/tls_config.h"

#include <sys/stat.h>

#include <algorithm>

#include "common/files.h"
#include "security/certs.h"

namespace tessera::security {

StatusOr<std::shared_ptr<const TlsConfig>> TlsConfig::Load(const std::string& job, const std::string& ca_file,
                                                           const std::string& cert_file,
                                                           const std::string& key_file) {
  if (ca_file.empty() || cert_file.empty() || key_file.empty()) {
    return Status::InvalidArgument(
        "TLS needs the job's CA, this node's certificate and its key (--tls-ca, "
        "--tls-cert, --tls-key; `tessera certs` makes them)");
  }
  struct stat st {};
  if (::stat(key_file.c_str(), &st) == 0 && OthersMayRead(st)) {
    return Status::PermissionDenied("the TLS key " + key_file + " may be read by others (chmod 600 " +
                                    key_file + ")");
  }
  auto c = std::make_shared<TlsConfig>();
  c->job = job;
  TESSERA_ASSIGN_OR_RETURN(c->ca_pem, ReadFile(ca_file));
  TESSERA_ASSIGN_OR_RETURN(c->cert_pem, ReadFile(cert_file));
  TESSERA_ASSIGN_OR_RETURN(c->key_pem, ReadFile(key_file));
  auto signed_by = SignedBy(c->cert_pem, c->ca_pem);
  if (!signed_by.ok()) return signed_by.status().WithContext(cert_file + " or " + ca_file);
  if (!*signed_by)
    return Status::InvalidArgument("the certificate " + cert_file + " is not signed by the CA " + ca_file);
  TESSERA_ASSIGN_OR_RETURN(auto names, CertNames(c->cert_pem));
  if (std::find(names.begin(), names.end(), "DNS:" + JobTlsName(job)) == names.end()) {
    return Status::InvalidArgument("the certificate " + cert_file + " is not for job '" + job +
                                   "' (it does not name " + JobTlsName(job) + ")");
  }
  auto matches = KeyMatches(c->cert_pem, c->key_pem);
  if (!matches.ok()) return matches.status().WithContext(key_file);
  if (!*matches) return Status::InvalidArgument("the key " + key_file + " does not belong to " + cert_file);
  return std::shared_ptr<const TlsConfig>(std::move(c));
}

std::string TlsConfig::PeerName() const { return JobTlsName(job); }

}  // namespace tessera::security
