// Stream socket I/O (see stream_io.h).
#include "transport/stream_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/net.h"
#include "transport/spin_governor.h"
#include "transport/tls_stream.h"

namespace tessera {
namespace {

constexpr size_t kMaxIov = 1024;  // IOV_MAX on Linux

int PollMillis(const Deadline* deadline) {
  if (!deadline) return -1;
  auto ms = deadline->remaining().count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// Moves past `done` bytes of the iovec array (n entries left).
void Advance(iovec*& iov, size_t& n, size_t done) {
  while (n > 0 && done >= iov->iov_len) {
    done -= iov->iov_len;
    ++iov;
    --n;
  }
  if (n > 0) {
    iov->iov_base = static_cast<char*>(iov->iov_base) + done;
    iov->iov_len -= done;
  }
}

}  // namespace

bool AbortableSocket::Set(UniqueFd fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return false;
  fd_ = std::move(fd);
  return true;
}

void AbortableSocket::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  fd_.Reset();
}

void AbortableSocket::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

Status AbandonedCall(const std::string& peer, const char* transport) {
  return Status::Unavailable("pserver " + peer + " (" + std::string(transport) +
                             "): call abandoned (the pserver was replaced or its registration is gone)");
}

Status WaitFd(int fd, short events, const Deadline* deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, PollMillis(deadline));
    if (r > 0) return Status::OK();  // ready, or an error the next call reports
    if (r == 0) return Status::DeadlineExceeded("timed out waiting for the peer");
    if (errno != EINTR) return Status::Unavailable(std::string("poll: ") + std::strerror(errno));
  }
}

std::atomic<int> DataPlaneWork::count_{0};

namespace {
// Guarded by SpinUntilReadable's `polling` (one poller at a time).
SpinGovernor governor;
std::atomic<int64_t> spins{0}, skipped{0}, back_offs{0};
}  // namespace

void SpinUntilReadable(int fd, std::chrono::microseconds spin, int own_work) {
  // One poller per process at a time, and only while no other work of the data plane is under
  // way here (a second lane's call, another connection's request): that work needs the cores.
  static std::atomic<bool> polling{false};
  auto alone = [&] { return DataPlaneWork::count() <= own_work; };
  if (spin.count() <= 0 || !alone() || polling.exchange(true, std::memory_order_acquire)) return;
  if (!governor.MaySpin()) {
    skipped.fetch_add(1, std::memory_order_relaxed);
    polling.store(false, std::memory_order_release);
    return;
  }
  spins.fetch_add(1, std::memory_order_relaxed);
  auto last = std::chrono::steady_clock::now();
  const auto until = last + spin;
  SpinOutcome outcome;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) {  // readable, closed, or an error the read reports
      outcome.arrived = true;
      break;
    }
    sched_yield();  // a thread woken on this core runs now
    const auto now = std::chrono::steady_clock::now();
    outcome.longest_gap =
        std::max(outcome.longest_gap, std::chrono::duration_cast<std::chrono::microseconds>(now - last));
    last = now;
    if (outcome.longest_gap >= SpinGovernor::kLostCore) break;  // its core is wanted elsewhere
    if (now >= until) {
      outcome.ran_out = true;
      break;
    }
    if (!alone()) break;
  }
  governor.Record(outcome);
  back_offs.store(governor.back_offs(), std::memory_order_relaxed);
  polling.store(false, std::memory_order_release);
}

std::string SpinSummary(const SpinCounters& c) {
  if (c.spins == 0 && c.skipped == 0) return "";
  return "busy polling: " + std::to_string(c.spins) + " waits spun, " + std::to_string(c.skipped) +
         " slept at once (" + std::to_string(c.back_offs) + (c.back_offs == 1 ? " back-off)" : " back-offs)");
}

SpinCounters SpinCountersNow() {
  return {spins.load(std::memory_order_relaxed), skipped.load(std::memory_order_relaxed),
          back_offs.load(std::memory_order_relaxed)};
}

Status WriteFully(int fd, iovec* iov, size_t n, const Deadline* deadline) {
  while (n > 0 && iov->iov_len == 0) {
    ++iov;
    --n;
  }
  while (n > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = std::min(n, kMaxIov);
    TESSERA_ASSIGN_OR_RETURN(size_t w, RetrySocketCall(fd, POLLOUT, deadline, "send", [&] {
                               return ::sendmsg(fd, &msg, MSG_NOSIGNAL | (deadline ? MSG_DONTWAIT : 0));
                             }));
    Advance(iov, n, w);
  }
  return Status::OK();
}

StreamReader::StreamReader(size_t stage_bytes) : stage_(new char[stage_bytes]), stage_size_(stage_bytes) {}

void StreamReader::Reset(int fd, TlsStream* tls) {
  fd_ = fd;
  tls_ = tls;
  begin_ = end_ = 0;
  total_ = 0;
}

void StreamReader::AwaitMessage(std::chrono::microseconds spin, int own_work) {
  if (spin.count() <= 0 || staged() || (tls_ && tls_->buffered())) return;
  SpinUntilReadable(fd_, spin, own_work);
}

Status StreamReader::Fill(const Deadline* deadline) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (tls_) {
    TESSERA_ASSIGN_OR_RETURN(size_t r, tls_->ReadSome(stage_.get() + end_, stage_size_ - end_, deadline));
    end_ += r;
    total_ += r;
    return Status::OK();
  }
  TESSERA_ASSIGN_OR_RETURN(size_t r, RetrySocketCall(fd_, POLLIN, deadline, "recv", [&] {
                             return ::recv(fd_, stage_.get() + end_, stage_size_ - end_,
                                           deadline ? MSG_DONTWAIT : 0);
                           }));
  if (r == 0) return Status::Unavailable("connection closed by the peer");
  end_ += r;
  total_ += r;
  return Status::OK();
}

Status StreamReader::ReadDirect(iovec* iov, size_t n, size_t bytes, const Deadline* deadline,
                                ReplyWatcher* watcher, size_t placed) {
  while (bytes > 0) {
    size_t r = 0;
    if (tls_) {
      TESSERA_ASSIGN_OR_RETURN(r, tls_->ReadSome(iov->iov_base, iov->iov_len, deadline));
    } else {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = std::min(n, kMaxIov);
      TESSERA_ASSIGN_OR_RETURN(r, RetrySocketCall(fd_, POLLIN, deadline, "recv", [&] {
                                 return ::recvmsg(fd_, &msg, deadline ? MSG_DONTWAIT : 0);
                               }));
    }
    if (r == 0) return Status::Unavailable("connection closed by the peer");
    bytes -= r;
    total_ += r;
    Advance(iov, n, r);
    placed += r;
    if (watcher) watcher->Arrived(placed);
  }
  return Status::OK();
}

Status StreamReader::ReadInto(std::span<const MutableBuffer> bufs, size_t n, const Deadline* deadline,
                              ReplyWatcher* watcher) {
  size_t bi = 0, off = 0;  // position in bufs
  size_t placed = 0;       // bytes written into bufs
  auto advance = [&](size_t k) {
    off += k;
    while (bi < bufs.size() && off == bufs[bi].size) {
      ++bi;
      off = 0;
    }
  };
  advance(0);
  // Small remainders go through the stage: one recv() takes a whole small message.
  while (n > 0 && (begin_ < end_ || n < stage_size_ / 2)) {
    if (begin_ == end_) TESSERA_RETURN_IF_ERROR(Fill(deadline));
    if (bi >= bufs.size()) return Status::Internal("read past the end of the given buffers");
    size_t k = std::min({end_ - begin_, n, bufs[bi].size - off});
    std::memcpy(static_cast<char*>(bufs[bi].data) + off, stage_.get() + begin_, k);
    begin_ += k;
    n -= k;
    placed += k;
    advance(k);
  }
  if (watcher && placed > 0) watcher->Arrived(placed);
  if (n == 0) return Status::OK();
  // Large remainders land straight in the caller's buffers.
  std::vector<iovec>& iov = iov_;
  iov.clear();
  size_t want = n;
  for (size_t i = bi; i < bufs.size() && want > 0; ++i) {
    size_t start = i == bi ? off : 0;
    size_t k = std::min(bufs[i].size - start, want);
    if (k == 0) continue;
    iov.push_back({static_cast<char*>(bufs[i].data) + start, k});
    want -= k;
  }
  if (want > 0) return Status::Internal("read past the end of the given buffers");
  return ReadDirect(iov.data(), iov.size(), n, deadline, watcher, placed);
}

Status StreamReader::Read(void* dst, size_t n, const Deadline* deadline) {
  MutableBuffer b{dst, n};
  return ReadInto({&b, 1}, n, deadline);
}

Status StreamReader::Skip(size_t n, const Deadline* deadline) {
  while (n > 0) {
    if (begin_ == end_) TESSERA_RETURN_IF_ERROR(Fill(deadline));
    size_t k = std::min(end_ - begin_, n);
    begin_ += k;
    n -= k;
  }
  return Status::OK();
}

StatusOr<UniqueFd> ConnectTcp(const std::string& address, const Deadline& deadline) {
  TESSERA_ASSIGN_OR_RETURN(AddrInfoList res, ResolveTcp(address));
  Status last = Status::Unavailable("no address for " + address);
  for (addrinfo* a = res.get(); a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = Status::Unavailable(std::string("socket: ") + std::strerror(errno));
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Status::Unavailable("connect to " + address + ": " + std::strerror(errno));
        continue;
      }
      Status w = WaitFd(fd.get(), POLLOUT, &deadline);
      if (!w.ok()) {
        last = Status(w.code(), "connect to " + address + ": " + w.message());
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = Status::Unavailable("connect to " + address + ": " + std::strerror(err));
        continue;
      }
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Blocking from here on: calls with a deadline pass MSG_DONTWAIT and poll.
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    return fd;
  }
  return last;
}

std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  if (ss.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t cl = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
      return "local pid " + std::to_string(cred.pid);
    return "a local peer";
  }
  return "a peer of family " + std::to_string(ss.ss_family);
}

}  // namespace tessera
