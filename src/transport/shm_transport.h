// The shared-memory data-plane transport, for a trainer and a pserver on the same host.
//
// Each side owns one region of shared memory (a sealed memfd that it maps read-write and the
// peer maps read-only) and writes its messages there: payload at offset 0, header after it.
// The frames themselves (frame.h preambles, 48 bytes) travel over a Unix seqpacket socket in
// the abstract namespace, which is also the signal: the receiver sleeps in recvmsg/poll, after
// polling the socket for TransportOptions::busy_poll (zero by default: at once). A region that is too small
// is replaced by a larger one, whose descriptor rides along with the frame that first needs it (SCM_RIGHTS);
// the receiver checks its seals (it cannot shrink under a reader) and its size before mapping it.
//
// Copies: a push is copied once, from the caller's buffers into the client's region, and the
// pserver reads it there; a pull is copied from the shard into the pserver's region (under the
// shard's lock, as every transport must) and from there into the caller's parameter memory.
// A pserver that dies closes the socket: the client sees Unavailable, as with TCP.
//
// Same host means the same kernel boot and network namespace (HostIdentity): abstract Unix
// sockets are per network namespace, so hosts simulated with namespaces use TCP between them.
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace tessera {

// Serves on an abstract Unix socket "@tessera-shm-<pid>-<random>" (endpoint()); Start's host
// and port are ignored.
std::unique_ptr<ServerTransport> NewShmServerTransport(const TransportOptions& options = {});
// `endpoint`: the server's endpoint() ("@name"). Its Call fails with Unavailable when nobody
// listens there (the pserver is gone or not up yet: retry), and with PermissionDenied when the
// socket exists but this process may not connect to it (a sandbox): shared memory is out of
// reach between the two, and a trainer with transport auto uses TCP instead.
std::unique_ptr<ClientConnection> NewShmConnection(const std::string& endpoint,
                                                   const TransportOptions& options = {});

}  // namespace tessera
