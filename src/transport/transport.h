// The data-plane transport interface: how push and pull requests travel between trainers and
// pservers. A message is a header (a serialized tessera.wire.DataRequest or DataReply) plus a
// payload of bytes whose layout the header describes. The pserver and client logic use only
// this interface, so gRPC, TCP and shared-memory transports are interchangeable.
//
// Buffers: the sender gathers its payload from the caller's own buffers; the receiver of a reply
// scatters the payload into buffers the caller gave (a pull can land straight in parameter
// memory). A transport may copy; the fast ones do not.
//
// Thread-safety: a ClientConnection serves one call at a time (each pserver link owns one); a
// ServerTransport calls its handler from any number of threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera {

struct ConstBuffer {
  const void* data = nullptr;
  size_t size = 0;
};

struct MutableBuffer {
  void* data = nullptr;
  size_t size = 0;
};

inline size_t TotalSize(std::span<const ConstBuffer> bufs) {
  size_t n = 0;
  for (const auto& b : bufs) n += b.size;
  return n;
}
inline size_t TotalSize(std::span<const MutableBuffer> bufs) {
  size_t n = 0;
  for (const auto& b : bufs) n += b.size;
  return n;
}

// Sends the reply to one request. Exactly one Send per request, from any thread, at any time
// (a pull may be answered when a barrier completes). The payload only has to stay valid until
// Send returns.
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void Send(std::string_view header, std::span<const ConstBuffer> payload) = 0;
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // `header` and `payload` are valid only during this call: keep copies of what you need later.
  virtual void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> responder) = 0;
};

class ServerTransport {
 public:
  virtual ~ServerTransport() = default;
  // Listens on host:port (port 0: any free port) and passes every request to `handler`.
  virtual Status Start(const std::string& host, int port, RequestHandler* handler) = 0;
  virtual int port() const = 0;
  virtual std::string name() const = 0;
  // Stops listening and drops connections. Replies not yet sent are abandoned (their
  // Responders' Send becomes a no-op); callers fail their pending requests first.
  virtual void Shutdown() = 0;
};

struct CallResult {
  std::string header;        // the reply header
  size_t payload_bytes = 0;  // how many payload bytes arrived (0 for error replies)
};

class ClientConnection {
 public:
  virtual ~ClientConnection() = default;
  // Sends one request and waits up to `timeout` for its reply. The reply payload fills
  // `reply_buffers` in order from the start (DataLoss if it is larger than they are); the result
  // says how many bytes arrived. Unavailable when the peer cannot be reached or the connection
  // breaks: the caller may retry on a new connection.
  virtual StatusOr<CallResult> Call(std::string_view header, std::span<const ConstBuffer> payload,
                                    std::span<const MutableBuffer> reply_buffers,
                                    std::chrono::milliseconds timeout) = 0;
  virtual const std::string& address() const = 0;
};

}  // namespace tessera
