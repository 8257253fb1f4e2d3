// gRPC TLS credentials (see grpc_tls.h).
#include "security/grpc_tls.h"

namespace tessera::security {

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsConfig* tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls->ca_pem;
  o.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> GrpcChannelCredentials(const TlsConfig* tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = tls->ca_pem;
  o.pem_private_key = tls->key_pem;
  o.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(o);
}

void AddGrpcTlsArgs(grpc::ChannelArguments* args, const TlsConfig* tls) {
  if (tls) args->SetSslTargetNameOverride(tls->PeerName());
}

}  // namespace tessera::security
