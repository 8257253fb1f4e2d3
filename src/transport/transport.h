// The data-plane transport interface: how push and pull requests travel between trainers and
// pservers. A message is a header (a serialized tessera.wire.DataRequest or DataReply) plus a
// payload of bytes whose layout the header describes. The pserver and client logic use only
// this interface, so gRPC, TCP and shared-memory transports are interchangeable.
//
// Buffers: the sender gathers its payload from the caller's own buffers; the receiver of a reply
// scatters the payload into buffers the caller gave (a pull can land straight in parameter
// memory); a reply's payload is built in memory the transport lends (Responder::Allocate: the
// connection's reusable send buffer, or shared memory the peer reads). A transport may copy;
// the fast ones (tcp, shm) do not, and allocate nothing per message once their buffers have
// grown to the largest message seen.
//
// Thread-safety: a ClientConnection serves one call at a time (each pserver link owns one); a
// ServerTransport calls its handler from any number of threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "common/metrics.h"
#include "security/job_secret.h"
#include "security/tls_config.h"
#include "tessera/status.h"
#include "transport/frame.h"

namespace tessera {

// Which transport carries the data plane. kAuto: shared memory with a pserver on the same host,
// TCP otherwise (a pserver started with auto serves all three).
enum class TransportKind { kGrpc, kTcp, kShm, kAuto };
StatusOr<TransportKind> ParseTransportKind(std::string_view name);
std::string TransportKindName(TransportKind kind);
inline std::ostream& operator<<(std::ostream& o, TransportKind k) { return o << TransportKindName(k); }

struct TransportOptions {
  FrameLimits limits;          // tcp, shm: the largest header and payload a receiver accepts
  int max_connections = 1024;  // tcp, shm servers: more are refused (closed at once)
  // tcp, shm servers: how long a reply may wait for a peer that does not read before the
  // connection is closed.
  std::chrono::milliseconds send_timeout{std::chrono::seconds(60)};
  // The job's secret. Servers: every request must carry its MAC (tcp, shm) or token (grpc), and
  // one that does not is refused, logged and counted in `auth_refused` (if set). Clients: requests
  // are signed with it and replies checked (security/frame_mac.h, security/rpc_auth.h). Empty on
  // both sides: nothing is signed. Shared memory also serves its own user only (SO_PEERCRED).
  security::JobSecret secret;
  metrics::Counter* auth_refused = nullptr;
  // The job's mutual TLS (grpc and tcp: servers require and verify a client certificate of the
  // job's CA and name, clients accept only a server certificate of the job's CA and name; shm,
  // local to one user, is unchanged). Null: plaintext.
  std::shared_ptr<const security::TlsConfig> tls;
  // tcp, shm: how long a side that waits for the peer's next message (a client for its reply, a
  // server connection for the next request) checks for it without sleeping before it sleeps. A
  // sleeping thread's wake-up can cost 50 us and more where idle cores halt (a VM's vCPUs), twice
  // per request; polling keeps the core awake but busy, so it is for a process with a core of
  // its own (common/busy_poll.h). Zero (the default): sleep at once.
  std::chrono::microseconds busy_poll{0};
  // shm clients: the trainer's window (shm_window.h). A call whose payload and reply buffers
  // each lie in one run of it, made while it is held, is read and answered there in place.
  std::shared_ptr<class ShmWindow> window;
};

// A request's payload made as it is sent (a push narrowed into its wire format): given with the
// first payload buffer, the transport calls Fill(n) before it reads any payload byte below n, n
// rising to the whole payload. Tcp fills a run at a time, each while the link carries the runs
// before it; the other transports fill all of it before they read any. On the calling thread,
// inside Call; a retried call fills again from the start (a filler makes each byte once).
class PayloadFiller {
 public:
  virtual ~PayloadFiller() = default;
  virtual void Fill(size_t bytes) = 0;
};

struct ConstBuffer {
  const void* data = nullptr;
  size_t size = 0;
  PayloadFiller* filler = nullptr;  // with the first buffer only; null: made already
};

// A caller's reader of a reply as its bytes come (tcp tells one; the other transports do not, and
// the caller reads the reply once Call returns). Both run on the calling thread, inside Call:
// Begin once the reply's header is read and checked, before any of its payload; then Arrived as
// payload bytes land in the reply buffers, the last time with all of them. A call that fails may
// have begun and not ended; a retry begins again.
class ReplyWatcher {
 public:
  virtual ~ReplyWatcher() = default;
  virtual void Begin(std::string_view header, size_t payload_bytes) = 0;
  // The payload's first `bytes` are in the reply buffers.
  virtual void Arrived(size_t bytes) = 0;
};

struct MutableBuffer {
  void* data = nullptr;
  size_t size = 0;
  // A reply's buffer whose reader reads it as it is written (shm, in the trainer's window): where
  // whoever writes it tells how far it has got (common/reply_progress.h). Null otherwise. A
  // caller may give one with its first reply buffer, a word in its window (ShmWindow::
  // progress_slot): a call answered there in place is told in it.
  std::atomic<uint64_t>* progress = nullptr;
  // Given with the first reply buffer: told of the reply as it arrives (tcp). Null: not told.
  ReplyWatcher* watcher = nullptr;
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
// A transport that reads the payload at once: makes all of it first (PayloadFiller).
inline void FillWhole(std::span<const ConstBuffer> bufs) {
  if (!bufs.empty() && bufs[0].filler) bufs[0].filler->Fill(TotalSize(bufs));
}

// Copies `bufs` one after another to `to` (TotalSize(bufs) bytes of room).
inline void GatherInto(std::span<const ConstBuffer> bufs, char* to) {
  for (const auto& b : bufs) {
    if (b.size) std::memcpy(to, b.data, b.size);
    to += b.size;
  }
}

// Sends the reply to one request. Exactly one Send per request, from any thread, at any time
// (a pull may be answered when a barrier completes). The payload only has to stay valid until
// Send returns. A responder dropped without Send fails the request (the client sees Unavailable
// and may retry). Send never blocks on the network.
class Responder {
 public:
  virtual ~Responder() = default;
  // Memory for a reply payload of `bytes`, valid until Send (or the responder's end). A payload
  // built there and passed to Send as the single buffer {data, bytes} is sent without a copy.
  // At most one Allocate per responder.
  virtual MutableBuffer Allocate(size_t bytes) = 0;
  virtual void Send(std::string_view header, std::span<const ConstBuffer> payload) = 0;
  // Send for a payload made as it is sent: `payload` is this responder's Allocate memory, and
  // `filler` makes it (PayloadFiller), kept until the reply is written or dropped. Over tcp the
  // connection's thread makes a run at a time while the runs before go; the default makes all of
  // it here, then sends.
  virtual void SendMade(std::string_view header, MutableBuffer payload,
                        std::unique_ptr<PayloadFiller> filler) {
    filler->Fill(payload.size);
    const ConstBuffer b{payload.data, payload.size};
    Send(header, payload.size ? std::span<const ConstBuffer>(&b, 1) : std::span<const ConstBuffer>{});
  }
};

// A handler's reader of a request's payload as its bytes come (tcp tells one; the other
// transports do not). Arrived runs on the thread that then calls Handle, after each receive,
// with the payload's first `bytes` at `payload` (the place may move from one call to the next),
// growing to all of it; a request whose connection breaks may end without it.
class RequestWatcher {
 public:
  virtual ~RequestWatcher() = default;
  virtual void Arrived(const char* payload, size_t bytes) = 0;
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Once a request's header is read and checked, before any of its payload (tcp): a watcher to
  // tell of the payload as it comes, or null (the default). It lives until Handle returns.
  virtual RequestWatcher* Watch(std::string_view header, size_t payload_bytes) { return nullptr; }
  // `header` and `payload` are valid only during this call: keep copies of what you need later.
  virtual void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> responder) = 0;
};

class ServerTransport {
 public:
  virtual ~ServerTransport() = default;
  // Listens on host:port (port 0: any free port) and passes every request to `handler`.
  virtual Status Start(const std::string& host, int port, RequestHandler* handler) = 0;
  virtual int port() const = 0;
  // What a client connects to: "host:port" (grpc, tcp) or a local socket name (shm).
  virtual std::string endpoint() const = 0;
  virtual std::string name() const = 0;
  // Stops listening and drops connections. Replies not yet sent are abandoned (their
  // Responders' Send becomes a no-op); callers fail their pending requests first.
  virtual void Shutdown() = 0;
};

struct CallResult {
  std::string_view header;   // the reply header; valid until the next Call on the connection
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
  // From any thread: the call in progress returns at once, and it and every later call fail
  // with Unavailable ("abandoned"). For a caller that learns its peer was replaced (a frozen
  // pserver whose lease expired) while a call waits on it. The connection is not used again.
  virtual void Abort() = 0;
};

}  // namespace tessera
