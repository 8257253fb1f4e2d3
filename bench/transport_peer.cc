// transport_peer: the far end of ps_bench's transport-level measurements, in its own process.
//
//   transport_peer --transport tcp|shm|grpc [--secret HEX] [--tls-dir DIR]
//       serves a data-plane transport (with --secret, every frame authenticated with that job
//       secret, as a pserver does; with --tls-dir, over mutual TLS with bench_tls.h's
//       certificates) whose handler does no work of its own: a request with
//       header "push" is acknowledged; "pull N" is answered with N payload bytes built in the
//       memory the transport lends (Responder::Allocate); "pushpull N" does both. What is
//       measured is the transport alone, as the reference server's benchmark does.
//   transport_peer --pingpong
//       a raw TCP server for the baselines: each exchange is two 4-byte counts (in, out), then
//       `in` bytes read and `out` bytes written back; (4096, 4096) is the ping-pong a small round
//       trip is held against, (N, 0) and (0, N) a raw push and pull of N bytes.
//
// Prints "endpoint <where>" once it serves; runs until SIGTERM. Bench-only.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_tls.h"
#include "transport/stream_io.h"
#include "transport/transport_factory.h"

namespace tessera::bench {
namespace {

class NullHandler : public RequestHandler {
 public:
  void Handle(std::string_view header, ConstBuffer, std::unique_ptr<Responder> r) override {
    size_t n = 0;
    if (header.rfind("pull ", 0) == 0 || header.rfind("pushpull ", 0) == 0) {
      n = std::strtoull(header.data() + header.find(' ') + 1, nullptr, 10);
    }
    if (n == 0) return r->Send("ok", {});
    MutableBuffer b = r->Allocate(n);
    ConstBuffer c{b.data, b.size};
    r->Send("ok", {&c, 1});
  }
};

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

int ServeTransport(const std::string& name, const std::string& secret, const std::string& tls_dir) {
  auto kind = ParseTransportKind(name);
  if (!kind.ok() || *kind == TransportKind::kAuto) {
    std::fprintf(stderr, "--transport: grpc, tcp or shm\n");
    return 2;
  }
  NullHandler handler;
  TransportOptions options;
  if (!secret.empty()) {
    auto s = security::JobSecret::FromText(secret);
    if (!s.ok()) {
      std::fprintf(stderr, "--secret: %s\n", s.status().message().c_str());
      return 2;
    }
    options.secret = *s;
  }
  if (!tls_dir.empty()) {
    auto tls = LoadBenchTls(tls_dir);
    if (!tls.ok()) {
      std::fprintf(stderr, "--tls-dir: %s\n", tls.status().message().c_str());
      return 2;
    }
    options.tls = *tls;
  }
  auto server = NewServerTransport(*kind, options);
  if (Status s = server->Start("127.0.0.1", 0, &handler); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("endpoint %s\n", server->endpoint().c_str());
  std::fflush(stdout);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server->Shutdown();
  return 0;
}

void Echo(int fd) {
  std::vector<char> buf;
  while (true) {
    uint32_t n[2];
    if (::recv(fd, n, sizeof n, MSG_WAITALL) != sizeof n) break;
    buf.resize(std::max<size_t>({n[0], n[1], 1}));
    if (n[0] && ::recv(fd, buf.data(), n[0], MSG_WAITALL) != static_cast<ssize_t>(n[0])) break;
    size_t out = std::max<uint32_t>(n[1], 1);  // at least one byte: the reply
    for (size_t off = 0; off < out;) {
      ssize_t w = ::send(fd, buf.data() + off, out - off, MSG_NOSIGNAL);
      if (w <= 0) {
        ::close(fd);
        return;
      }
      off += static_cast<size_t>(w);
    }
  }
  ::close(fd);
}

int ServePingPong() {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 8) != 0 ||
      ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("listen");
    return 1;
  }
  std::printf("endpoint 127.0.0.1:%d\n", ntohs(a.sin_port));
  std::fflush(stdout);
  while (!g_stop) {
    int fd = ::accept(ls, nullptr, nullptr);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread(Echo, fd).detach();
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"Far end of ps_bench's transport measurements"};
  std::string transport, secret, tls_dir;
  bool pingpong = false;
  app.add_option("--transport", transport, "grpc, tcp or shm");
  app.add_option("--secret", secret, "authenticate every frame with this job secret (64 hex characters)");
  app.add_option(
      "--tls-dir", tls_dir,
      "mutual TLS with ca.pem, node.pem and node.key of this directory, for job 'bench' (tcp, grpc)");
  app.add_flag("--pingpong", pingpong, "raw TCP echo server instead");
  CLI11_PARSE(app, argc, argv);
  struct sigaction sa {};
  sa.sa_handler = tessera::bench::OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  return pingpong ? tessera::bench::ServePingPong()
                  : tessera::bench::ServeTransport(transport, secret, tls_dir);
}
