// The TCP data-plane transport: Tessera's own frames (frame.h) on plain TCP sockets.
//
// Client: one socket per connection, one call at a time; the request is written with one
// gathered send from the caller's own buffers (preamble, header, every payload buffer), and the
// reply's payload is read straight into the caller's reply buffers (a pull lands in parameter
// memory). Small messages take one system call each way.
//
// Server: a thread per connection (the peers of a pserver are its trainers: tens, not
// thousands), reading each request into a receive buffer the connection reuses, handing it to
// the handler, then writing the reply from the connection's reusable reply buffer (which
// Responder::Allocate lends, so a pull is copied once, from the shard into that buffer). A reply
// sent from another thread (a pull released by a barrier) is handed to the connection's thread;
// the handler never blocks on a socket. A frame with a bad magic, an impossible or too large
// length, or a body cut short closes that connection with one log line naming the peer; buffers
// grow only as bytes actually arrive, so a lying length costs nothing.
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace tessera {

std::unique_ptr<ServerTransport> NewTcpServerTransport(const TransportOptions& options = {});
std::unique_ptr<ClientConnection> NewTcpConnection(const std::string& address,
                                                   const TransportOptions& options = {});

}  // namespace tessera
