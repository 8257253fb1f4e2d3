// The TCP data-plane transport (see tcp_transport.h).
#include "transport/tcp_transport.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "common/while_waiting.h"
#include "transport/aligned_buffer.h"
#include "transport/frame.h"
#include "transport/frame_auth.h"
#include "transport/stream_io.h"
#include "transport/stream_server.h"
#include "transport/tls_stream.h"

namespace tessera {
namespace {

// Bytes of a watched request's payload read between two calls of its watcher.
constexpr size_t kWatchedRun = size_t{256} << 10;

// Reads `n` bytes into buf at `off`, growing the buffer only as bytes arrive (a frame that
// claims a large length but sends little costs little memory); `watcher` (if any) is told after
// every run of kWatchedRun.
Status ReadGrowing(StreamReader& reader, AlignedBuffer& buf, size_t off, size_t n, const Deadline* deadline,
                   RequestWatcher* watcher = nullptr) {
  size_t got = 0;
  while (got < n) {
    size_t chunk = std::min(n - got, std::max<size_t>(got, size_t{1} << 20));
    try {
      buf.Reserve(off + got + chunk, off + got);
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("out of memory for a frame of " + std::to_string(n) + " bytes");
    }
    const size_t run = watcher ? kWatchedRun : chunk;
    for (size_t done = 0; done < chunk;) {  // bounded: every turn reads at least a byte
      const size_t step = std::min(run, chunk - done);
      TESSERA_RETURN_IF_ERROR(reader.Read(buf.data() + off + got + done, step, deadline));
      done += step;
      if (watcher) watcher->Arrived(buf.data() + off, got + done);
    }
    got += chunk;
  }
  return Status::OK();
}

// Writes a whole message, through TLS when the connection has it.
Status Send(int fd, TlsStream* tls, iovec* iov, size_t n, const Deadline* deadline) {
  return tls ? tls->WriteFully(iov, n, deadline) : WriteFully(fd, iov, n, deadline);
}

// A payload made as it is sent (PayloadFiller): the first run small, so its bytes leave at once.
constexpr size_t kFirstFillRun = size_t{256} << 10;
constexpr size_t kFillRun = size_t{1} << 20;

// The preamble, the header and the payload of a frame (`iov`: scratch, reused from frame to
// frame). A payload made as it is sent goes a run at a time, each made just before it is written,
// while the link carries the runs before it.
Status SendFrame(int fd, TlsStream* tls, uint8_t* pre, std::string_view header,
                 std::span<const ConstBuffer> payload, const Deadline& d, std::vector<iovec>& iov) {
  iov.clear();
  iov.push_back({pre, kFramePreambleBytes});
  iov.push_back({const_cast<char*>(header.data()), header.size()});
  PayloadFiller* filler = payload.empty() ? nullptr : payload[0].filler;
  if (!filler) {
    for (const auto& b : payload) {
      if (b.size) iov.push_back({const_cast<void*>(b.data), b.size});
    }
    return Send(fd, tls, iov.data(), iov.size(), &d);
  }
  size_t sent = 0, run = kFirstFillRun;
  for (const auto& b : payload) {
    const char* data = static_cast<const char*>(b.data);
    // Bounded by the buffer's size: every turn sends at least one byte of it.
    for (size_t off = 0; off < b.size;) {
      const size_t take = std::min(run, b.size - off);
      filler->Fill(sent + take);
      iov.push_back({const_cast<char*>(data + off), take});
      TESSERA_RETURN_IF_ERROR(Send(fd, tls, iov.data(), iov.size(), &d));
      iov.clear();
      off += take;
      sent += take;
      run = kFillRun;
    }
  }
  return iov.empty() ? Status::OK() : Send(fd, tls, iov.data(), iov.size(), &d);
}

// The job's TLS context for one side, shared by a server's connections; null without TLS.
StatusOr<std::shared_ptr<SSL_CTX>> ContextFor(const security::TlsConfig* tls, security::TlsSide side) {
  if (!tls) return std::shared_ptr<SSL_CTX>();
  TESSERA_ASSIGN_OR_RETURN(security::SslContext ctx, security::MakeSslContext(*tls, side));
  return std::shared_ptr<SSL_CTX>(std::move(ctx));
}

// One accepted TCP connection: the request lands in `in_` (header at 0, payload at the next
// 64-byte boundary, so the floats are aligned), the reply goes out from `out_`. With TLS, the
// handshake comes first, and everything after it goes through the TLS stream.
class TcpChannel : public MessageChannel {
 public:
  TcpChannel(UniqueFd fd, const TransportOptions& options, std::shared_ptr<SSL_CTX> tls_ctx)
      : fd_(std::move(fd)),
        limits_(options.limits),
        busy_poll_(options.busy_poll),
        auth_(FrameAuth::ForServer(options.secret)),
        tls_ctx_(std::move(tls_ctx)) {
    reader_.Reset(fd_.get());
  }
  int fd() const override { return fd_.get(); }

  Status Open(const Deadline& deadline) override {
    if (tls_ctx_) {
      const std::string peer = PeerName(fd_.get());
      auto tls = TlsStream::Handshake(fd_.get(), tls_ctx_.get(), security::TlsSide::kServer,
                                      "the client " + peer, deadline);
      if (!tls.ok()) return tls.status();
      tls_ = std::move(*tls);
      spdlog::debug("tcp data plane: TLS with {} ({})", peer, tls_->Description());
      reader_.Reset(fd_.get(), tls_.get());
    }
    uint8_t greeting[kGreetingBytes];
    auth_.EncodeGreeting(greeting);
    iovec iov{greeting, sizeof greeting};
    return Send(fd_.get(), tls_.get(), &iov, 1, &deadline);
  }

  Status ReadRequest(uint64_t* id, std::string_view* header, ConstBuffer* payload,
                     RequestHandler* handler) override {
    uint8_t pre[kFramePreambleBytes];
    const uint64_t before = reader_.total_read();
    reader_.AwaitMessage(busy_poll_);
    Status s = reader_.Read(pre, sizeof pre, nullptr);
    if (!s.ok()) {
      if (reader_.total_read() == before) return Status::Cancelled("closed");  // between messages
      return Status::Unavailable("the frame was cut short in its preamble: " + s.message());
    }
    TESSERA_ASSIGN_OR_RETURN(FramePreamble p, DecodePreamble(pre, limits_));
    if (p.kind != FrameKind::kRequest) return Status::InvalidArgument("a reply frame was sent to the server");
    if (p.flags & (kFrameFlagNewWindow | kFrameFlagInWindow))
      return Status::InvalidArgument("a frame over TCP names a shared-memory window");
    const size_t poff = PayloadAlign(p.header_len);
    s = ReadGrowing(reader_, in_, 0, p.header_len, nullptr);
    if (s.ok()) {
      // Refused before a byte of the payload is read.
      if (Status a = auth_.CheckRequest(pre, p.request_id, std::string_view(in_.data(), p.header_len));
          !a.ok()) {
        *id = p.request_id;
        return a;
      }
      RequestWatcher* watcher =
          handler && p.payload_len > 0
              ? handler->Watch(std::string_view(in_.data(), p.header_len), p.payload_len)
              : nullptr;
      s = ReadGrowing(reader_, in_, poff, p.payload_len, nullptr, watcher);
    }
    if (!s.ok()) {
      return Status(s.code() == StatusCode::kResourceExhausted ? s.code() : StatusCode::kUnavailable,
                    "the frame (header " + std::to_string(p.header_len) + " bytes, payload " +
                        std::to_string(p.payload_len) + " bytes) was cut short: " + s.message());
    }
    *id = p.request_id;
    *header = std::string_view(in_.data(), p.header_len);
    *payload = ConstBuffer{in_.data() + poff, p.payload_len};
    return Status::OK();
  }

  MutableBuffer ReplyBuffer(size_t bytes) override {
    out_.Reserve(bytes);
    return {out_.data(), bytes};
  }

  void WriteRefusal(uint64_t id) override {
    uint8_t refusal[kFramePreambleBytes];
    EncodeRefusal(id, refusal);
    iovec iov{refusal, sizeof refusal};
    Deadline d(std::chrono::seconds(1));
    (void)Send(fd_.get(), tls_.get(), &iov, 1, &d);
  }

  Status WriteReply(uint64_t id, std::string_view header, size_t payload_bytes, const Deadline& deadline,
                    PayloadFiller* filler) override {
    uint8_t pre[kFramePreambleBytes];
    EncodePreamble({FrameKind::kReply, 0, id, static_cast<uint32_t>(header.size()), payload_bytes}, pre);
    auth_.Sign(pre, header);
    const ConstBuffer payload{out_.data(), payload_bytes, filler};
    return SendFrame(fd_.get(), tls_.get(), pre, header, {&payload, 1}, deadline, iov_);
  }

 private:
  UniqueFd fd_;
  FrameLimits limits_;
  std::chrono::microseconds busy_poll_;
  FrameAuth auth_;
  std::shared_ptr<SSL_CTX> tls_ctx_;
  std::unique_ptr<TlsStream> tls_;  // after the handshake, with TLS
  StreamReader reader_;
  AlignedBuffer in_, out_;
  std::vector<iovec> iov_;  // a reply frame's, reused
};

class TcpServerTransport : public StreamServer {
 public:
  using StreamServer::StreamServer;
  std::string name() const override { return "tcp"; }

  Status Start(const std::string& host, int port, RequestHandler* handler) override {
    TESSERA_ASSIGN_OR_RETURN(tls_ctx_, ContextFor(options().tls.get(), security::TlsSide::kServer));
    return StreamServer::Start(host, port, handler);
  }

 protected:
  StatusOr<UniqueFd> Listen(const std::string& host, int port, int* bound_port,
                            std::string* endpoint) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    const std::string where = host + ":" + std::to_string(port);
    if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); e != 0) {
      return Status::Unavailable("cannot listen on " + where + ": " + ::gai_strerror(e));
    }
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
    UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Status::Unavailable("socket: " + std::string(std::strerror(errno)));
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
      return Status::Unavailable("cannot listen on " + where + ": " + std::strerror(errno));
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    *bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    *endpoint =
        (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(*bound_port);
    return fd;
  }

  std::unique_ptr<MessageChannel> NewChannel(UniqueFd fd) override {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return std::make_unique<TcpChannel>(std::move(fd), options(), tls_ctx_);
  }

 private:
  std::shared_ptr<SSL_CTX> tls_ctx_;  // with TLS
};

class TcpConnection : public ClientConnection {
 public:
  TcpConnection(std::string address, const TransportOptions& options)
      : address_(std::move(address)),
        limits_(options.limits),
        secret_(options.secret),
        tls_config_(options.tls),
        busy_poll_(options.busy_poll) {}

  StatusOr<CallResult> Call(std::string_view header, std::span<const ConstBuffer> payload,
                            std::span<const MutableBuffer> reply_buffers,
                            std::chrono::milliseconds timeout) override {
    Deadline d(timeout);
    DataPlaneWork work;
    TESSERA_RETURN_IF_ERROR(CheckRequestSize(header.size(), TotalSize(payload), limits_));
    if (fd_.aborted()) return AbandonedCall(address_, "tcp");
    if (!fd_.valid()) {
      auto fd = ConnectTcp(address_,
                           Deadline(std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(2))));
      if (!fd.ok()) return Fail(fd.status(), "cannot connect");
      if (!fd_.Set(std::move(*fd))) return AbandonedCall(address_, "tcp");
      reader_.Reset(fd_.get());
      if (tls_config_) {
        if (Status s = StartTls(d); !s.ok()) {
          if (s.code() == StatusCode::kUnauthenticated || s.code() == StatusCode::kInvalidArgument)
            return Refuse(s);
          return Fail(s, "TLS handshake");
        }
      }
      uint8_t greeting[kGreetingBytes];
      if (Status s = reader_.Read(greeting, sizeof greeting, &d); !s.ok()) {
        // TLS 1.3: a server that refuses our certificate says so on our first read.
        if (s.code() == StatusCode::kUnauthenticated) return Refuse(s);
        return Fail(s, "waiting for the greeting");
      }
      auto auth = FrameAuth::FromGreeting(greeting, secret_, address_ + " (tcp)");
      if (!auth.ok()) return Refuse(auth.status());
      auth_.emplace(std::move(*auth));
    }
    const uint64_t id = ++next_id_;
    uint8_t pre[kFramePreambleBytes];
    EncodePreamble({FrameKind::kRequest, 0, id, static_cast<uint32_t>(header.size()), TotalSize(payload)},
                   pre);
    auth_->Sign(pre, header);
    if (Status s = SendFrame(fd_.get(), tls_.get(), pre, header, payload, d, iov_); !s.ok())
      return Fail(s, "send");
    {
      WaitingCall call;
      call.reply_fd = fd_.get();
      call.deadline = d.at();
      if (!reply_buffers.empty()) call.caller_word = reply_buffers[0].progress;
      WhileWaiting::RunHere(call);
    }
    reader_.AwaitMessage(busy_poll_, /*own_work=*/1);
    if (Status s = reader_.Read(pre, sizeof pre, &d); !s.ok()) return Fail(s, "waiting for the reply");
    auto p = DecodeReply(pre, limits_, id);
    if (!p.ok()) return Fail(p.status(), "reading the reply");
    if (p->flags & kFrameFlagRefused) return Refuse(RefusedByServer(address_, "tcp"));
    header_.resize(p->header_len);
    if (Status s = reader_.Read(header_.data(), header_.size(), &d); !s.ok())
      return Fail(s, "reading the reply");
    if (Status s = auth_->CheckReply(pre, header_, address_ + " (tcp)"); !s.ok()) return Refuse(s);
    if (p->payload_len > TotalSize(reply_buffers)) {
      Drop();
      return ReplyTooLarge(address_, p->payload_len, TotalSize(reply_buffers));
    }
    ReplyWatcher* watcher = reply_buffers.empty() ? nullptr : reply_buffers[0].watcher;
    if (watcher) watcher->Begin(header_, p->payload_len);
    if (Status s = reader_.ReadInto(reply_buffers, p->payload_len, &d, watcher); !s.ok())
      return Fail(s, "reading the reply");
    return CallResult{header_, p->payload_len};
  }

  const std::string& address() const override { return address_; }
  void Abort() override { fd_.Abort(); }

 private:
  // The handshake on a fresh socket; then reads and writes go through TLS.
  Status StartTls(const Deadline& d) {
    if (!tls_ctx_) {
      TESSERA_ASSIGN_OR_RETURN(tls_ctx_, ContextFor(tls_config_.get(), security::TlsSide::kClient));
    }
    TESSERA_ASSIGN_OR_RETURN(tls_, TlsStream::Handshake(fd_.get(), tls_ctx_.get(), security::TlsSide::kClient,
                                                        "pserver " + address_ + " (tcp)", d));
    reader_.Reset(fd_.get(), tls_.get());
    return Status::OK();
  }
  void Drop() {
    tls_.reset();  // before its socket closes
    fd_.Reset();
    auth_.reset();
  }
  // The two sides disagree on the job's secret: retrying would not help.
  Status Refuse(const Status& s) {
    Drop();
    return s;
  }
  // A failed call leaves the stream in an unknown state: drop the connection (the next call
  // reconnects).
  Status Fail(const Status& s, const std::string& what) {
    Drop();
    if (fd_.aborted()) return AbandonedCall(address_, "tcp");
    return CallFailed(address_, "tcp", what, s);
  }

  std::string address_;
  FrameLimits limits_;
  security::JobSecret secret_;
  std::optional<FrameAuth> auth_;                          // set while connected
  std::shared_ptr<const security::TlsConfig> tls_config_;  // a TLS job's
  std::chrono::microseconds busy_poll_;
  std::shared_ptr<SSL_CTX> tls_ctx_;                       // made on the first connect
  std::unique_ptr<TlsStream> tls_;                         // while connected, with TLS
  AbortableSocket fd_;
  StreamReader reader_;
  uint64_t next_id_ = 0;
  std::vector<iovec> iov_;
  std::string header_;
};

}  // namespace

std::unique_ptr<ServerTransport> NewTcpServerTransport(const TransportOptions& options) {
  return std::make_unique<TcpServerTransport>(options);
}

std::unique_ptr<ClientConnection> NewTcpConnection(const std::string& address,
                                                   const TransportOptions& options) {
  return std::make_unique<TcpConnection>(address, options);
}

}  // namespace tessera
