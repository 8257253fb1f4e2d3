// The gRPC implementation of the data-plane transport: one unary RPC DataPlane.Call per request,
// carrying the header and the payload as protobuf bytes. Simple and portable; it copies the
// payload into and out of protobuf messages, so it is the slow path (about 1 GB/s here).
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace tessera {

std::unique_ptr<ServerTransport> NewGrpcServerTransport(const TransportOptions& options);
std::unique_ptr<ClientConnection> NewGrpcConnection(const std::string& address,
                                                    const TransportOptions& options);

}  // namespace tessera
