// /healthz and /readyz for a trainer, so Kubernetes (and the launchers) can probe it like the
// pservers and masters: alive while the process answers, ready once it has joined the job.
// Started by a session when TESSERA_HTTP_PORT (or SessionOptions::http_port) is set.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "tessera/status.h"

namespace tessera {
class NodeHttp;
}

namespace tessera::api {

class HealthServer {
 public:
  // Binds host:port (0: any free port) and serves until destroyed.
  static StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& host, int port);
  ~HealthServer();
  void SetReady(bool ready) { ready_ = ready; }
  int port() const { return port_; }

 private:
  HealthServer();
  std::unique_ptr<NodeHttp> http_;
  std::atomic<bool> ready_{false};
  int port_ = 0;
};

}  // namespace tessera::api
