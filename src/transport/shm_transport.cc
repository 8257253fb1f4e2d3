// The shared-memory data-plane transport (see shm_transport.h).
#include "transport/shm_transport.h"

#include <errno.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <random>

#include "common/while_waiting.h"
#include "security/peer_cred.h"
#include "transport/frame_auth.h"
#include "transport/shm_region.h"
#include "transport/shm_window.h"
#include "transport/stream_server.h"

namespace tessera {
namespace {

StatusOr<sockaddr_un> AbstractAddress(const std::string& endpoint, socklen_t* len) {
  if (endpoint.size() < 2 || endpoint[0] != '@' || endpoint.size() > sizeof(sockaddr_un::sun_path)) {
    return Status::InvalidArgument("shared-memory endpoint '" + endpoint + "' is not @name");
  }
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';  // the abstract namespace: no file, gone with the process
  std::memcpy(a.sun_path + 1, endpoint.data() + 1, endpoint.size() - 1);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + endpoint.size());
  return a;
}

// The server's side of one connection: requests are read in the client's region, replies are
// written into this side's region.
class ShmChannel : public MessageChannel {
 public:
  ShmChannel(UniqueFd fd, const TransportOptions& options)
      : fd_(std::move(fd)),
        limits_(options.limits),
        busy_poll_(options.busy_poll),
        auth_(FrameAuth::ForServer(options.secret)) {}
  int fd() const override { return fd_.get(); }

  Status Open(const Deadline& deadline) override {
    // The abstract socket has no file mode: anyone on the host may connect. Serve our own user.
    TESSERA_RETURN_IF_ERROR(security::CheckSameUser(fd_.get(), "the process"));
    uint8_t greeting[kGreetingBytes];
    auth_.EncodeGreeting(greeting);
    return SendGreeting(fd_.get(), greeting, &deadline);
  }

  Status ReadRequest(uint64_t* id, std::string_view* header, ConstBuffer* payload,
                     RequestHandler* /*handler: the payload is whole in the region*/) override {
    uint8_t pre[kFramePreambleBytes];
    UniqueFd fd;
    SpinUntilReadable(fd_.get(), busy_poll_);
    TESSERA_RETURN_IF_ERROR(RecvFrame(fd_.get(), pre, &fd, nullptr));
    TESSERA_ASSIGN_OR_RETURN(FramePreamble p, DecodePreamble(pre, limits_));
    if (p.kind != FrameKind::kRequest) return Status::InvalidArgument("a reply frame was sent to the server");
    reply_room_ = {};
    reply_in_window_ = false;
    const bool new_region = p.flags & kFrameFlagNewRegion;
    const bool new_window = p.flags & kFrameFlagNewWindow;
    const bool in_window = p.flags & kFrameFlagInWindow;
    if (new_region && new_window)
      return Status::InvalidArgument("a frame announced both a region and a window");
    if (new_window && !in_window) return Status::InvalidArgument("a frame brought a window it does not use");
    if ((new_region || new_window) && !fd.valid())
      return Status::InvalidArgument("a frame announced a descriptor but carried none");
    if (!new_region && !new_window && fd.valid())
      return Status::InvalidArgument("a frame carried a descriptor it did not announce");
    if (new_region) TESSERA_RETURN_IF_ERROR(peer_.Map(std::move(fd), MaxRegionBytes(limits_)));
    if (new_window) {
      // One window per connection: a renewed one comes with a new connection, so memory lent to a
      // handler (ReplyBuffer) is never unmapped under it.
      if (window_.mapped()) return Status::InvalidArgument("a second window came on one connection");
      TESSERA_RETURN_IF_ERROR(window_.Map(std::move(fd), kMaxWindowBytes, /*writable=*/true));
    }
    if (!peer_.mapped()) return Status::InvalidArgument("a request came before any shared region");
    const uint64_t hoff = in_window ? 0 : PayloadAlign(p.payload_len);
    if (hoff + p.header_len > peer_.size()) {
      return Status::InvalidArgument("the frame (payload " + std::to_string(p.payload_len) +
                                     " bytes, header " + std::to_string(p.header_len) +
                                     " bytes) does not fit the " + std::to_string(peer_.size()) +
                                     "-byte shared region");
    }
    const std::string_view signed_part(peer_.data() + hoff, p.header_len);
    *id = p.request_id;
    *header = signed_part;
    *payload = ConstBuffer{peer_.data(), p.payload_len};
    if (in_window) {
      if (!window_.mapped()) return Status::InvalidArgument("a request in a window came before any window");
      if (p.header_len < kWindowDescriptorBytes)
        return Status::InvalidArgument("a request in a window has no window descriptor");
      TESSERA_ASSIGN_OR_RETURN(WindowDescriptor w,
                               DecodeWindowDescriptor(reinterpret_cast<const uint8_t*>(signed_part.data()),
                                                      p.payload_len, window_.size()));
      *header = signed_part.substr(kWindowDescriptorBytes);
      *payload = ConstBuffer{window_.data() + w.payload_offset, p.payload_len};
      reply_room_ = w;
    }
    return auth_.CheckRequest(pre, p.request_id, signed_part);
  }

  void WriteRefusal(uint64_t id) override {
    uint8_t refusal[kFramePreambleBytes];
    EncodeRefusal(id, refusal);
    Deadline d(std::chrono::seconds(1));
    (void)SendFrame(fd_.get(), refusal, -1, &d);
  }

  MutableBuffer ReplyBuffer(size_t bytes) override {
    // A request in the trainer's window is answered there when its room holds the reply.
    reply_in_window_ = reply_room_.reply_room > 0 && bytes <= reply_room_.reply_room;
    if (reply_in_window_) {
      char* at = window_.writable_data() + reply_room_.reply_offset;
      std::atomic<uint64_t>* word = nullptr;
      if (reply_room_.progress_offset != 0)
        word =
            reinterpret_cast<std::atomic<uint64_t>*>(window_.writable_data() + reply_room_.progress_offset);
      return {at, bytes, word};
    }
    // Room for the header too (most fit in 64 KiB; a larger one grows the region in WriteReply).
    Status s = own_.Ensure(PayloadAlign(bytes) + 65536, 0, MaxRegionBytes(limits_));
    if (!s.ok()) {
      broken_ = s;
      fallback_.resize(bytes);
      return {fallback_.data(), bytes};
    }
    return {own_.data(), bytes};
  }

  Status WriteReply(uint64_t id, std::string_view header, size_t payload_bytes, const Deadline& deadline,
                    PayloadFiller* filler) override {
    if (!broken_.ok()) return broken_;
    if (filler) filler->Fill(payload_bytes);  // the peer reads it whole, in place
    const bool in_window = reply_in_window_ && payload_bytes > 0;
    const size_t region_payload = in_window ? 0 : payload_bytes;
    const size_t hoff = PayloadAlign(region_payload);
    if (region_payload > 0 && !own_.data()) return Status::Internal("reply payload without a reply buffer");
    TESSERA_RETURN_IF_ERROR(own_.Ensure(hoff + header.size(), region_payload, MaxRegionBytes(limits_)));
    std::memcpy(own_.data() + hoff, header.data(), header.size());
    uint8_t pre[kFramePreambleBytes];
    const int pass = own_.pending_fd();
    const uint8_t flags = (pass >= 0 ? kFrameFlagNewRegion : 0) | (in_window ? kFrameFlagInWindow : 0);
    EncodePreamble({FrameKind::kReply, flags, id, static_cast<uint32_t>(header.size()), payload_bytes}, pre);
    auth_.Sign(pre, header);
    TESSERA_RETURN_IF_ERROR(SendFrame(fd_.get(), pre, pass, &deadline));
    own_.FdSent();
    return Status::OK();
  }

 private:
  UniqueFd fd_;
  FrameLimits limits_;
  std::chrono::microseconds busy_poll_;
  FrameAuth auth_;
  PeerRegion peer_;
  OwnRegion own_;
  PeerRegion window_;             // the trainer's window, mapped read-write (shm_window.h)
  WindowDescriptor reply_room_;   // the current request's, when it came in the window
  bool reply_in_window_ = false;  // the reply payload is being built in the window
  Status broken_;
  std::string fallback_;
};

class ShmServerTransport : public StreamServer {
 public:
  using StreamServer::StreamServer;
  std::string name() const override { return "shm"; }

 protected:
  StatusOr<UniqueFd> Listen(const std::string&, int, int* bound_port, std::string* endpoint) override {
    std::random_device rd;
    char name[64];
    std::snprintf(name, sizeof name, "@tessera-shm-%d-%08x%08x", static_cast<int>(::getpid()), rd(), rd());
    socklen_t len;
    TESSERA_ASSIGN_OR_RETURN(sockaddr_un a, AbstractAddress(name, &len));
    UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd.get(), 128) != 0) {
      return Status::Unavailable(std::string("cannot listen on ") + name + ": " + std::strerror(errno));
    }
    *bound_port = 0;
    *endpoint = name;
    return fd;
  }

  std::unique_ptr<MessageChannel> NewChannel(UniqueFd fd) override {
    return std::make_unique<ShmChannel>(std::move(fd), options());
  }
};

class ShmConnection : public ClientConnection {
 public:
  ShmConnection(std::string endpoint, const TransportOptions& options)
      : endpoint_(std::move(endpoint)),
        limits_(options.limits),
        secret_(options.secret),
        busy_poll_(options.busy_poll),
        window_(options.window) {}

  StatusOr<CallResult> Call(std::string_view header, std::span<const ConstBuffer> payload,
                            std::span<const MutableBuffer> reply_buffers,
                            std::chrono::milliseconds timeout) override {
    Deadline d(timeout);
    DataPlaneWork work;
    const size_t n = TotalSize(payload);
    TESSERA_RETURN_IF_ERROR(CheckRequestSize(header.size(), n, limits_));
    if (sock_.aborted()) return AbandonedCall(endpoint_, "shm");
    FillWhole(payload);
    call_generation_ = 0;
    // The pserver maps the window as this connection sent it: after a renewal, a new connection.
    if (sock_.valid() && window_sent_ != 0 && window_->generation() != window_sent_) Drop();
    if (!sock_.valid()) TESSERA_RETURN_IF_ERROR(Connect(d));
    UniqueFd window_fd;
    uint64_t generation = 0;
    std::optional<WindowDescriptor> place =
        PlaceInWindow(header.size(), payload, n, reply_buffers, &window_fd, &generation);
    const size_t descriptor = place ? kWindowDescriptorBytes : 0;
    const size_t hoff = place ? 0 : PayloadAlign(n);
    if (Status s = own_.Ensure(hoff + descriptor + header.size(), 0, MaxRegionBytes(limits_)); !s.ok())
      return Fail(s, "region");
    // Work waiting to run beside this call may read the reply as it is written (a progress word):
    // the one the caller gave with its reply buffers (a client tracking several calls at once),
    // or the window's own for work on this thread.
    std::atomic<uint64_t>* progress = nullptr;
    if (place && place->reply_room > 0) {
      const int64_t given = reply_buffers.empty() || !reply_buffers[0].progress
                                ? -1
                                : window_->OffsetOf(reply_buffers[0].progress, sizeof(uint64_t));
      if (given >= 0) {
        progress = reply_buffers[0].progress;
        place->progress_offset = static_cast<uint64_t>(given);
      } else if (WhileWaiting::WantsProgress()) {
        progress = window_->progress_word();
        place->progress_offset = window_->progress_offset();
      }
      if (progress) progress->store(0, std::memory_order_relaxed);
    }
    if (place) {
      EncodeWindowDescriptor(*place, reinterpret_cast<uint8_t*>(own_.data()));
    } else {
      GatherInto(payload, own_.data());
    }
    std::memcpy(own_.data() + hoff + descriptor, header.data(), header.size());
    const std::string_view signed_part(own_.data() + hoff, descriptor + header.size());
    const uint64_t id = ++next_id_;
    uint8_t pre[kFramePreambleBytes];
    const int pass = window_fd.valid() ? window_fd.get() : own_.pending_fd();
    uint8_t flags = own_.pending_fd() >= 0 ? kFrameFlagNewRegion : 0;
    if (window_fd.valid()) flags |= kFrameFlagNewWindow;
    if (place) flags |= kFrameFlagInWindow;
    EncodePreamble({FrameKind::kRequest, flags, id, static_cast<uint32_t>(signed_part.size()), n}, pre);
    auth_->Sign(pre, signed_part);
    if (Status s = SendFrame(sock_.get(), pre, pass, &d); !s.ok()) return Fail(s, "send");
    own_.FdSent();
    if (window_fd.valid()) window_sent_ = generation;
    if (place) {
      call_generation_ = generation;  // from here a failure renews the window
      CountWindowRequest();
    }
    UniqueFd region;
    {
      WaitingCall call;
      call.reply_fd = sock_.get();
      call.deadline = d.at();
      if (!reply_buffers.empty()) call.caller_word = reply_buffers[0].progress;
      if (progress) {
        call.progress = progress;
        call.reply_base = window_->base() + place->reply_offset;
        call.reply_room = place->reply_room;
      }
      WhileWaiting::RunHere(call);
    }
    SpinUntilReadable(sock_.get(), busy_poll_, /*own_work=*/1);
    if (Status s = RecvFrame(sock_.get(), pre, &region, &d); !s.ok()) {
      return Fail(
          s.code() == StatusCode::kCancelled ? Status::Unavailable("connection closed by the pserver") : s,
          "waiting for the reply");
    }
    auto p = DecodeReply(pre, limits_, id);
    if (!p.ok()) return Fail(p.status(), "reading the reply");
    if (p->flags & kFrameFlagRefused) return Refuse(RefusedByServer(endpoint_, "shm"));
    if (p->flags & kFrameFlagNewRegion) {
      if (Status s = peer_.Map(std::move(region), MaxRegionBytes(limits_)); !s.ok())
        return Fail(s, "reply region");
    }
    const bool reply_in_window = p->flags & kFrameFlagInWindow;
    if (reply_in_window && (!place || p->payload_len > place->reply_room)) {
      return Fail(Status::Unavailable("the pserver answered in the window beyond the room the request gave"),
                  "bad reply frame");
    }
    const uint64_t rhoff = reply_in_window ? 0 : PayloadAlign(p->payload_len);
    if (!peer_.mapped() || rhoff + p->header_len > peer_.size()) {
      return Fail(Status::Unavailable("the reply does not fit the pserver's shared region"),
                  "bad reply frame");
    }
    const std::string_view reply_header(peer_.data() + rhoff, p->header_len);
    if (Status s = auth_->CheckReply(pre, reply_header, endpoint_ + " (shm)"); !s.ok()) return Refuse(s);
    if (p->payload_len > TotalSize(reply_buffers)) {
      Drop();
      return ReplyTooLarge(endpoint_, p->payload_len, TotalSize(reply_buffers));
    }
    if (reply_in_window) {
      // Written into memory that another call's failure may have replaced since: then it is lost,
      // and this call fails too (it is retried like any other).
      if (!window_->Still(call_generation_)) {
        return Fail(Status::Unavailable("the window was renewed during the call (another call failed)"),
                    "reply in the window");
      }
      CountWindowReply();
    } else {
      size_t at = 0;
      for (const auto& b : reply_buffers) {
        if (at >= p->payload_len) break;
        size_t k = std::min(b.size, p->payload_len - at);
        std::memcpy(b.data, peer_.data() + at, k);
        at += k;
      }
    }
    call_generation_ = 0;
    return CallResult{reply_header, p->payload_len};
  }

  const std::string& address() const override { return endpoint_; }
  void Abort() override { sock_.Abort(); }

 private:
  Status Connect(const Deadline& deadline) {
    socklen_t len;
    TESSERA_ASSIGN_OR_RETURN(sockaddr_un a, AbstractAddress(endpoint_, &len));
    UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
      // Refused: nobody listens on that name (the pserver is gone or not up yet), retry as with
      // TCP. Anything else (a sandbox's denial) means this pair cannot use shared memory.
      const int err = errno;
      const std::string why = " to pserver at " + endpoint_ + " (shm): " + std::strerror(err);
      if (err == ECONNREFUSED) return Status::Unavailable("cannot connect" + why);
      return Status::PermissionDenied("shared memory is not reachable" + why);
    }
    if (!sock_.Set(std::move(fd))) return AbandonedCall(endpoint_, "shm");
    // Our parameters go into its memory and its replies into ours: it must be our own user.
    if (Status s = security::CheckSameUser(sock_.get(), "the pserver at " + endpoint_); !s.ok())
      return Refuse(s);
    uint8_t greeting[kGreetingBytes];
    if (Status s = RecvGreeting(sock_.get(), greeting, &deadline); !s.ok())
      return Fail(s, "waiting for the greeting");
    auto auth = FrameAuth::FromGreeting(greeting, secret_, endpoint_ + " (shm)");
    if (!auth.ok()) return Refuse(auth.status());
    auth_.emplace(std::move(*auth));
    return Status::OK();
  }
  // Where this call's payload and reply go in the trainer's window, if they can: the window is
  // shared and held, the payload and the reply buffers each fill one run of it, and the window
  // is on the pserver's side or can go with this frame (not with the frame that brings a new
  // region: one descriptor per frame). *window_fd: the window to send with it.
  std::optional<WindowDescriptor> PlaceInWindow(size_t header_bytes, std::span<const ConstBuffer> payload,
                                                size_t payload_bytes, std::span<const MutableBuffer> reply,
                                                UniqueFd* window_fd, uint64_t* generation) {
    if (!window_ || !window_->shared() || !window_->held()) return std::nullopt;
    if (header_bytes + kWindowDescriptorBytes > limits_.max_header) return std::nullopt;
    WindowDescriptor w;
    if (payload_bytes > 0) {
      const int64_t at = WindowRunOf(*window_, payload);
      if (at < 0) return std::nullopt;
      w.payload_offset = static_cast<uint64_t>(at);
    }
    w.reply_room = TotalSize(reply);
    if (w.reply_room > 0) {
      const int64_t at = WindowRunOf(*window_, reply);
      if (at < 0) return std::nullopt;
      w.reply_offset = static_cast<uint64_t>(at);
    }
    if (w.reply_room == 0 && payload_bytes == 0) return std::nullopt;
    if (ReplyOverlapsPayload(w, payload_bytes)) return std::nullopt;  // a pserver would refuse it
    if (window_sent_ != 0) {
      *generation = window_sent_;
      return w;
    }
    if (!own_.data() || own_.pending_fd() >= 0 || own_.size() < kWindowDescriptorBytes + header_bytes)
      return std::nullopt;
    *window_fd = window_->DuplicateFd(generation);
    if (!window_fd->valid()) return std::nullopt;
    return w;
  }

  // A failed call leaves the exchange in an unknown state: a new connection gets new regions (the
  // pserver may still be reading the old request), and a call in the window renews it (the
  // pserver may still write there later).
  void Drop() {
    if (call_generation_ != 0) {
      if (Status s = window_->Renew(call_generation_); !s.ok()) {
        spdlog::warn(
            "shm: the trainer's window could not be renewed after a failed call ({}); "
            "calls are copied from now on",
            s.message());
      }
      call_generation_ = 0;
    }
    window_sent_ = 0;
    sock_.Reset();
    own_.Reset();
    peer_.Reset();
    auth_.reset();
  }
  // The two sides disagree on who may talk: retrying would not help.
  Status Refuse(const Status& s) {
    Drop();
    return s;
  }
  Status Fail(const Status& s, const std::string& what) {
    Drop();
    if (sock_.aborted()) return AbandonedCall(endpoint_, "shm");
    return CallFailed(endpoint_, "shm", what, s);
  }

  std::string endpoint_;
  FrameLimits limits_;
  security::JobSecret secret_;
  std::chrono::microseconds busy_poll_;
  std::optional<FrameAuth> auth_;  // set while connected
  AbortableSocket sock_;
  OwnRegion own_;
  PeerRegion peer_;
  uint64_t next_id_ = 0;
  std::shared_ptr<ShmWindow> window_;  // the trainer's, or null
  uint64_t window_sent_ = 0;           // the window generation this connection's pserver maps (0: none)
  uint64_t call_generation_ = 0;       // the call in progress went in the window of this generation
};

}  // namespace

std::unique_ptr<ServerTransport> NewShmServerTransport(const TransportOptions& options) {
  return std::make_unique<ShmServerTransport>(options);
}

std::unique_ptr<ClientConnection> NewShmConnection(const std::string& endpoint,
                                                   const TransportOptions& options) {
  return std::make_unique<ShmConnection>(endpoint, options);
}

}  // namespace tessera
