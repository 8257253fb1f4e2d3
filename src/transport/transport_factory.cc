// Transport kinds and factories (see transport_factory.h).
#include "transport/transport_factory.h"

#include "transport/grpc_transport.h"
#include "transport/shm_transport.h"
#include "transport/tcp_transport.h"

namespace tessera {

StatusOr<TransportKind> ParseTransportKind(std::string_view name) {
  if (name == "grpc") return TransportKind::kGrpc;
  if (name == "tcp") return TransportKind::kTcp;
  if (name == "shm") return TransportKind::kShm;
  if (name == "auto") return TransportKind::kAuto;
  return Status::InvalidArgument("unknown transport '" + std::string(name) + "' (grpc, tcp, shm or auto)");
}

std::string TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kGrpc:
      return "grpc";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kShm:
      return "shm";
    case TransportKind::kAuto:
      return "auto";
  }
  return "unknown";
}

std::unique_ptr<ServerTransport> NewServerTransport(TransportKind kind, const TransportOptions& options) {
  switch (kind) {
    case TransportKind::kTcp:
      return NewTcpServerTransport(options);
    case TransportKind::kShm:
      return NewShmServerTransport(options);
    default:
      return NewGrpcServerTransport(options);
  }
}

std::unique_ptr<ClientConnection> NewClientConnection(TransportKind kind, const std::string& endpoint,
                                                      const TransportOptions& options) {
  switch (kind) {
    case TransportKind::kTcp:
      return NewTcpConnection(endpoint, options);
    case TransportKind::kShm:
      return NewShmConnection(endpoint, options);
    default:
      return NewGrpcConnection(endpoint, options);
  }
}

}  // namespace tessera
