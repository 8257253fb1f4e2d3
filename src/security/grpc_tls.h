// gRPC credentials from a job's TlsConfig: a server that requires and verifies a client
// certificate signed by the job's CA for the job's name (checked on every call), and a channel that presents
// this node's certificate and accepts only a server certificate the job's CA signed for the job's name
// (whatever address it was reached at: pods move). Null config: plaintext both ways. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "security/tls_config.h"

namespace tessera::security {

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsConfig* tls);
std::shared_ptr<grpc::ChannelCredentials> GrpcChannelCredentials(const TlsConfig* tls);
// Sets the name the server's certificate is checked against (the job's, not the address).
void AddGrpcTlsArgs(grpc::ChannelArguments* args, const TlsConfig* tls);

}  // namespace tessera::security
