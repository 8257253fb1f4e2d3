// NodeHttp: the HTTP endpoints a Tessera process serves beside its own protocol (a pserver's
// /metrics, /stats and probes, the master's console, a trainer's probes): one cpp-httplib server
// with the request limits of http_limits.h and an access rule (http_access.h) on every request,
// bound to host:port (0: any free port), its loop on a thread of its own, stopped and joined by
// Stop() or the destructor. Routes are added to server() before Listen. Header-only (for the
// libraries that already use cpp-httplib); Stop() may be called from any thread.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "common/addressing.h"
#include "common/http_limits.h"
#include "tessera/status.h"

namespace tessera {

class NodeHttp {
 public:
  // `access` null: every request is allowed (loopback).
  explicit NodeHttp(std::shared_ptr<const HttpAccess> access = nullptr) {
    LimitHttpRequests(server_, kMaxHttpRequestBody, nullptr, 0, std::move(access));
    server_.set_tcp_nodelay(true);  // else a kept-alive client waits 40 ms for each answer (delayed ACK)
  }
  ~NodeHttp() { Stop(); }
  NodeHttp(const NodeHttp&) = delete;
  NodeHttp& operator=(const NodeHttp&) = delete;

  httplib::Server& server() { return server_; }

  // Binds and serves in the background; the port bound. `what` names the endpoints in the error
  // ("/metrics", "the console").
  StatusOr<int> Listen(const std::string& host, int port, const std::string& what) {
    port_ = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
    if (port_ <= 0)
      return Status::Unavailable("cannot listen for " + what + " on " + JoinHostPort(host, port));
    thread_ = ServeInBackground(server_);
    return port_;
  }

  void Stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }

  // The base URL other processes use: at the node's advertised address when the endpoints are
  // bound to the node's own host or to every address, else at the host they are bound to.
  static std::string AdvertisedUrl(const std::string& bind_host, int port, const std::string& node_host,
                                   const std::string& advertise) {
    const bool at_node = bind_host == node_host || IsWildcardHost(bind_host);
    return "http://" + JoinHostPort(at_node ? advertise : bind_host, port);
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
};

}  // namespace tessera
