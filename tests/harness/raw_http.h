// A raw HTTP request for tests that must send what no well-behaved client would (a declared body
// far larger than what is sent). Test-only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <string>

#include "harness/wait.h"
#include "transport/stream_io.h"

namespace tessera::testing {

namespace raw_http_internal {
// Connects and sends `head`, a blank line and `body`; -1 when it cannot connect.
inline UniqueFd Send(const std::string& host, int port, const std::string& head, const std::string& body) {
  auto fd = ConnectTcp(host + ":" + std::to_string(port), Deadline(std::chrono::seconds(5)));
  if (!fd.ok()) return UniqueFd();
  std::string req = head + "\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < req.size()) {
    ssize_t n = ::send(fd->get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close once it has answered
    sent += static_cast<size_t>(n);
  }
  return std::move(*fd);
}
// Reads until `enough` holds for what was read, the connection closes or 10 s pass.
inline std::string Read(int fd, const std::function<bool(const std::string&)>& enough) {
  auto t0 = std::chrono::steady_clock::now();
  std::string reply;
  char buf[4096];
  while (!enough(reply) && SecondsSince(t0) < 10) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  return reply;
}
}  // namespace raw_http_internal

// Sends `head` (request line and headers, without the blank line) and `body`, then reads until
// the reply's headers are in (or 10 s pass). Returns what was read ("" if nothing).
inline std::string RawHttp(const std::string& host, int port, const std::string& head,
                           const std::string& body) {
  UniqueFd fd = raw_http_internal::Send(host, port, head, body);
  if (fd.get() < 0) return "";
  return raw_http_internal::Read(
      fd.get(), [](const std::string& r) { return r.find("\r\n\r\n") != std::string::npos; });
}

// The same, reading the whole reply: until the server closes the connection (or 10 s pass).
inline std::string RawHttpUntilClosed(const std::string& host, int port, const std::string& head,
                                      const std::string& body) {
  UniqueFd fd = raw_http_internal::Send(host, port, head, body);
  if (fd.get() < 0) return "";
  return raw_http_internal::Read(fd.get(), [](const std::string&) { return false; });
}

}  // namespace tessera::testing
