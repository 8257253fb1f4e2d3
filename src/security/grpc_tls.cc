// gRPC TLS credentials (see grpc_tls.h).
#include "security/grpc_tls.h"

#include <grpc/grpc_security_constants.h>
#include <spdlog/spdlog.h>

namespace tessera::security {
namespace {

// gRPC's server checks a client certificate against the CA only; this refuses, on every call,
// one the job's CA signed for another name (a CA shared by several jobs, given to `tessera
// certs --ca-cert`).
class JobPeerCheck : public grpc::AuthMetadataProcessor {
 public:
  explicit JobPeerCheck(std::string name) : name_(std::move(name)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata&, grpc::AuthContext* ctx, OutputMetadata*,
                       OutputMetadata*) override {
    std::string names;
    for (const auto& v : ctx->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
      std::string n(v.data(), v.size());
      if (n == name_) return grpc::Status::OK;
      names += (names.empty() ? "" : ", ") + n;
    }
    std::string why = "the client's TLS certificate is not for this job (it names " +
                      (names.empty() ? std::string("nothing") : names) + ", not " + name_ + ")";
    spdlog::warn("grpc: refused a call: {}", why);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
  }

 private:
  std::string name_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsConfig* tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls->ca_pem;
  o.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  auto creds = grpc::SslServerCredentials(o);
  creds->SetAuthMetadataProcessor(std::make_shared<JobPeerCheck>(tls->PeerName()));
  return creds;
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
