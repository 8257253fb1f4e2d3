// Which transport and endpoint a trainer uses to reach a pserver: from what the pserver
// offers in its registration (endpoints per transport, and the identity of its host) and what
// the trainer asked for. Pure: no I/O; thread-safe.
//
//   auto: shared memory when the pserver offers it and runs on the same host (same kernel boot and
//         network namespace), else TCP, else gRPC (a pserver that offers only that).
//   grpc | tcp | shm: that one, or FailedPrecondition saying what the pserver offers instead
//         (shm also needs the same host).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "tessera/status.h"
#include "transport/transport.h"

namespace tessera {

struct PserverEndpoints {
  std::map<TransportKind, std::string> endpoints;
  std::string host_id;  // empty: unknown (then never "the same host")
  bool operator==(const PserverEndpoints&) const = default;
};

// Reads a pserver registration value: {"address", "endpoints": {"grpc"|"tcp"|"shm": ...},
// "host_id"}. A registration without "endpoints" (older pservers) offers gRPC at "address".
StatusOr<PserverEndpoints> ParsePserverEndpoints(std::string_view registration);

struct EndpointChoice {
  TransportKind kind = TransportKind::kGrpc;
  std::string endpoint;
  bool operator==(const EndpointChoice&) const = default;
};

// `excluded`: a transport found unreachable for this registration (auto then takes the next).
StatusOr<EndpointChoice> ChooseEndpoint(const PserverEndpoints& offered, TransportKind wanted,
                                        const std::string& my_host_id,
                                        TransportKind excluded = TransportKind::kAuto);

// This process's host identity: hostname, kernel boot id and network namespace. Reads /proc.
std::string HostIdentity();

}  // namespace tessera
