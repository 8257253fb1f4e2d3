// Network helpers (see net.h).
#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tessera {

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::abort();
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

StatusOr<AddrInfoList> ResolveTcp(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::InvalidArgument("address '" + address + "' is not host:port");
  }
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); e != 0) {
    return Status::Unavailable("cannot resolve host '" + host + "': " + ::gai_strerror(e));
  }
  return AddrInfoList(res, ::freeaddrinfo);
}

Status ProbeTcp(const std::string& address, std::chrono::milliseconds timeout) {
  TESSERA_ASSIGN_OR_RETURN(AddrInfoList res, ResolveTcp(address));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why = "no address";
  for (addrinfo* a = res.get(); a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLOUT, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (r == 0) {
        ::close(fd);
        why = "no answer within " + std::to_string(timeout.count()) + " ms";
        continue;
      }
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    ::close(fd);
    if (err == 0) return Status::OK();
    why = err == ECONNREFUSED ? "connection refused (nothing listens on that port)" : std::strerror(err);
  }
  return Status::Unavailable(why);
}

StatusOr<std::string> SourceAddressToward(const std::string& address) {
  TESSERA_ASSIGN_OR_RETURN(AddrInfoList res, ResolveTcp(address));
  std::string why = "no address";
  for (addrinfo* a = res.get(); a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    sockaddr_storage self{};
    socklen_t len = sizeof self;
    bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0;
    if (!ok) why = std::strerror(errno);
    ::close(fd);
    if (!ok) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = self.ss_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&self)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&self)->sin_addr);
    if (::inet_ntop(self.ss_family, raw, text, sizeof text)) return std::string(text);
  }
  return Status::Unavailable("no route toward " + address + ": " + why);
}

int FreePortPair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    int p = FreeLoopbackPort();
    if (p <= 0 || p >= 65535) continue;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(p + 1));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    bool free = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) ::close(fd);
    if (free) return p;
  }
  return 0;
}

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace tessera
