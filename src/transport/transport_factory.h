// Creating data-plane transports by kind (grpc, tcp, shm) and naming the kinds. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace tessera {

// REQUIRES: kind is not kAuto (a pserver started with auto creates one of each).
std::unique_ptr<ServerTransport> NewServerTransport(TransportKind kind, const TransportOptions& options);
std::unique_ptr<ClientConnection> NewClientConnection(TransportKind kind, const std::string& endpoint,
                                                      const TransportOptions& options);

}  // namespace tessera
