// A raw HTTP request for tests that must send what no well-behaved client would (a declared body
// far larger than what is sent). Test-only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>

#include "harness/wait.h"
#include "transport/stream_io.h"

namespace tessera::testing {

// Sends `head` (request line and headers, without the blank line) and `body`, then reads until
// the reply's headers are in (or 10 s pass). Returns what was read ("" if nothing).
inline std::string RawHttp(const std::string& host, int port, const std::string& head, const std::string& body) {
  auto fd = ConnectTcp(host + ":" + std::to_string(port), Deadline(std::chrono::seconds(5)));
  if (!fd.ok()) return "";
  std::string req = head + "\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < req.size()) {
    ssize_t n = ::send(fd->get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close once it has answered
    sent += static_cast<size_t>(n);
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string reply;
  char buf[4096];
  while (reply.find("\r\n\r\n") == std::string::npos && SecondsSince(t0) < 10) {
    ssize_t n = ::recv(fd->get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  return reply;
}

}  // namespace tessera::testing
