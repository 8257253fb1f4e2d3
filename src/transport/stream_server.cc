// StreamServer (see stream_server.h).
#include "transport/stream_server.h"

#include <errno.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>

#include "transport/aligned_buffer.h"

namespace tessera {

// One accepted connection and the thread that serves it.
class StreamServer::Connection : public std::enable_shared_from_this<StreamServer::Connection> {
 public:
  Connection(std::unique_ptr<MessageChannel> channel, RequestHandler* handler, TransportOptions options,
             std::string server_name)
      : channel_(std::move(channel)),
        handler_(handler),
        options_(options),
        server_name_(std::move(server_name)),
        peer_(PeerName(channel_->fd())),
        wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  void Run();
  // Stops the connection from any thread (shutdown of the server).
  void Close();
  bool finished() const { return finished_.load(); }

  // For responders.
  void ResponderMade();
  void ResponderGone();
  MutableBuffer Allocate(uint64_t id, size_t bytes);
  void Complete(uint64_t id, std::string_view header, std::span<const ConstBuffer> payload,
                std::unique_ptr<PayloadFiller> filler = nullptr);
  void Abandon(uint64_t id);

 private:
  // Counts and logs a peer refused for its credentials.
  void Refused(const Status& s);
  // Reads one request, hands it to the handler and writes its reply. False if the connection
  // must close.
  bool ServeOne();
  // Waits until the current request's reply is ready. False if the connection must close.
  bool WaitReply();
  // The current reply's filler (PayloadFiller), if it has one; the connection no longer holds it.
  std::unique_ptr<PayloadFiller> TakeReplyFiller();
  void Wake() {
    uint64_t one = 1;
    if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof one);
  }

  std::unique_ptr<MessageChannel> channel_;
  RequestHandler* handler_;
  const TransportOptions options_;
  const std::string server_name_;
  const std::string peer_;
  UniqueFd wake_;
  std::thread::id thread_id_;
  std::atomic<bool> finished_{false};

  std::mutex mu_;  // guards everything below and the channel's reply buffer
  bool closed_ = false;
  uint64_t current_id_ = 0;
  bool in_request_ = false;  // a request was handed to the handler and has no reply yet
  bool ready_ = false;
  bool abandoned_ = false;
  // Responders alive: the memory they were lent (the channel's reply buffer, or scratch_) stays
  // until they are gone, even if the connection closes first (the handler may still write there).
  int responders_ = 0;
  std::string reply_header_;
  size_t reply_bytes_ = 0;
  std::unique_ptr<PayloadFiller> reply_filler_;  // makes the lent reply as it is written
  MutableBuffer lent_{};
  AlignedBuffer scratch_;  // for a responder whose request is over (its reply goes nowhere)
};

namespace {

class StreamResponder : public Responder {
 public:
  StreamResponder(std::shared_ptr<StreamServer::Connection> conn, uint64_t id)
      : conn_(std::move(conn)), id_(id) {
    conn_->ResponderMade();
  }
  ~StreamResponder() override {
    if (!sent_) conn_->Abandon(id_);
    conn_->ResponderGone();
  }
  MutableBuffer Allocate(size_t bytes) override { return conn_->Allocate(id_, bytes); }
  void Send(std::string_view header, std::span<const ConstBuffer> payload) override {
    if (sent_) return;
    sent_ = true;
    conn_->Complete(id_, header, payload);
  }
  void SendMade(std::string_view header, MutableBuffer payload,
                std::unique_ptr<PayloadFiller> filler) override {
    if (sent_) return;
    sent_ = true;
    const ConstBuffer b{payload.data, payload.size};
    conn_->Complete(id_, header, std::span<const ConstBuffer>(&b, 1), std::move(filler));
  }

 private:
  std::shared_ptr<StreamServer::Connection> conn_;
  uint64_t id_;
  bool sent_ = false;
};

}  // namespace

void StreamServer::Connection::Refused(const Status& s) {
  if (options_.auth_refused) options_.auth_refused->Add();
  spdlog::warn("{} data plane: refused the connection from {}: {}", server_name_, peer_, s.message());
}

void StreamServer::Connection::Run() {
  thread_id_ = std::this_thread::get_id();
  if (Status s = channel_->Open(Deadline(std::chrono::seconds(5))); !s.ok()) {
    if (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kUnauthenticated) {
      Refused(s);
    } else {
      spdlog::warn("{} data plane: closing the connection from {}: {}", server_name_, peer_, s.message());
    }
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    channel_.reset();
    finished_ = true;
    return;
  }
  // Bounded by the connection: each turn serves one request, and the peer or a shutdown ends it.
  while (ServeOne()) {
  }
  // A reply never written: its filler goes first (it cancels its copy, or waits for a writer
  // making it), while the memory it was to make is still there.
  TakeReplyFiller().reset();
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  in_request_ = false;
  ::shutdown(channel_->fd(), SHUT_RDWR);
  // Its buffers (up to the largest frame it received) go back to the system now, not when the
  // server next reaps finished connections; unless a responder still holds memory it lent (then
  // with the last responder, which owns this connection too).
  if (responders_ == 0) {
    channel_.reset();
    scratch_.Release();
  }
  finished_ = true;
}

bool StreamServer::Connection::ServeOne() {
  uint64_t id = 0;
  std::string_view header;
  ConstBuffer payload;
  Status s = channel_->ReadRequest(&id, &header, &payload, handler_);
  if (!s.ok()) {
    bool quiet = s.code() == StatusCode::kCancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      quiet = quiet || closed_;  // our own shutdown
    }
    if (s.code() == StatusCode::kUnauthenticated) {
      Refused(s);  // counted before the peer hears of it
      channel_->WriteRefusal(id);
    } else if (!quiet) {
      spdlog::warn("{} data plane: closing the connection from {}: {}", server_name_, peer_, s.message());
    }
    return false;
  }
  DataPlaneWork work;  // until the reply is sent
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    current_id_ = id;
    in_request_ = true;
    ready_ = abandoned_ = false;
    lent_ = {};
  }
  handler_->Handle(header, payload, std::make_unique<StreamResponder>(shared_from_this(), id));
  if (!WaitReply()) return false;
  // The reply buffer is not touched by anyone else until the next request is handed out (but
  // for its filler, which writes only what it has not made yet).
  std::unique_ptr<PayloadFiller> filler = TakeReplyFiller();
  Status w =
      channel_->WriteReply(id, reply_header_, reply_bytes_, Deadline(options_.send_timeout), filler.get());
  filler.reset();
  if (!w.ok()) {
    spdlog::warn("{} data plane: closing the connection to {}: the reply could not be sent: {}", server_name_,
                 peer_, w.message());
    return false;
  }
  return true;
}

std::unique_ptr<PayloadFiller> StreamServer::Connection::TakeReplyFiller() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(reply_filler_);
}

bool StreamServer::Connection::WaitReply() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!ready_ && !abandoned_ && !closed_) {
    lock.unlock();
    pollfd p[2] = {{channel_->fd(), POLLRDHUP, 0}, {wake_.get(), POLLIN, 0}};
    int r = ::poll(p, 2, -1);
    if (r < 0 && errno != EINTR) {
      lock.lock();
      break;
    }
    if (p[1].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof v);
    }
    lock.lock();
    if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      closed_ = true;  // the client went away while its request waited; its reply is dropped
      break;
    }
  }
  in_request_ = false;
  return ready_ && !closed_ && !abandoned_;
}

void StreamServer::Connection::ResponderMade() {
  std::lock_guard<std::mutex> lock(mu_);
  ++responders_;
}

void StreamServer::Connection::ResponderGone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--responders_ == 0 && finished_) {
    channel_.reset();
    scratch_.Release();
  }
}

void StreamServer::Connection::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  if (channel_) ::shutdown(channel_->fd(), SHUT_RDWR);
  Wake();
}

MutableBuffer StreamServer::Connection::Allocate(uint64_t id, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || !in_request_ || id != current_id_ || ready_) {
    scratch_.Reserve(bytes);
    return {scratch_.data(), bytes};
  }
  lent_ = channel_->ReplyBuffer(bytes);
  return lent_;
}

void StreamServer::Connection::Complete(uint64_t id, std::string_view header,
                                        std::span<const ConstBuffer> payload,
                                        std::unique_ptr<PayloadFiller> filler) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_ || !in_request_ || id != current_id_ || ready_) {
    lock.unlock();
    filler.reset();  // outside the lock: it may wait for a copy into the memory it was to make
    return;
  }
  reply_header_.assign(header.data(), header.size());
  const size_t n = TotalSize(payload);
  const bool in_place = payload.size() == 1 && payload[0].data == lent_.data && payload[0].size <= lent_.size;
  if (filler && !in_place) filler->Fill(n);  // copied below: made whole first
  if (filler && in_place) reply_filler_ = std::move(filler);
  if (!in_place && n > 0) {
    MutableBuffer b = channel_->ReplyBuffer(n);
    size_t off = 0;
    for (const auto& p : payload) {
      if (p.size) std::memcpy(static_cast<char*>(b.data) + off, p.data, p.size);
      off += p.size;
    }
  }
  reply_bytes_ = n;
  ready_ = true;
  if (std::this_thread::get_id() != thread_id_) Wake();
}

void StreamServer::Connection::Abandon(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || !in_request_ || id != current_id_ || ready_) return;
  // The handler dropped the request: close the connection, so the client fails over and retries.
  abandoned_ = true;
  if (std::this_thread::get_id() != thread_id_) Wake();
}

StreamServer::~StreamServer() { Shutdown(); }

Status StreamServer::Start(const std::string& host, int port, RequestHandler* handler) {
  handler_ = handler;
  TESSERA_ASSIGN_OR_RETURN(listen_fd_, Listen(host, port, &port_, &endpoint_));
  wake_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_.valid()) return Status::Internal(std::string("eventfd: ") + std::strerror(errno));
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return Status::OK();
}

void StreamServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{} data plane: poll on the listening socket failed: {}", name(), std::strerror(errno));
      return;
    }
    if (stopping_) return;
    if (!(p[0].revents & POLLIN)) continue;
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EMFILE || errno == ENFILE) {
        spdlog::error("{} data plane: cannot accept a connection: {}", name(), std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // bounded retry while fds are short
      }
      continue;
    }
    Reap(false);
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      if (!refused_logged_) {
        spdlog::warn(
            "{} data plane: refusing connections from {} and others: {} connections are open (the limit)",
            name(), PeerName(fd.get()), conns_.size());
        refused_logged_ = true;
      }
      continue;  // closed by fd's destructor
    }
    refused_logged_ = false;
    auto conn = std::make_shared<Connection>(NewChannel(std::move(fd)), handler_, options_, name());
    Entry e{conn, std::thread([conn] { conn->Run(); })};
    conns_.push_back(std::move(e));
  }
}

void StreamServer::Reap(bool all) {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < conns_.size();) {
      if (all || conns_[i].conn->finished()) {
        done.push_back(std::move(conns_[i].thread));
        conns_[i] = std::move(conns_.back());
        conns_.pop_back();
      } else {
        ++i;
      }
    }
  }
  for (auto& t : done) t.join();
}

void StreamServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_.valid()) {
    uint64_t one = 1;
    (void)!::write(wake_fd_.get(), &one, sizeof one);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : conns_) e.conn->Close();
  }
  Reap(true);
  listen_fd_.Reset();
}

}  // namespace tessera
