// A trainer's probe endpoints (see health_server.h).
#include "api/health_server.h"

#include <httplib.h>

#include "common/http_limits.h"
#include "common/http_probes.h"

namespace tessera::api {

HealthServer::HealthServer() : server_(std::make_unique<httplib::Server>()) {
  server_->set_tcp_nodelay(true);  // else a kept-alive client waits 40 ms for each answer (delayed ACK)
}

HealthServer::~HealthServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& host, int port) {
  std::unique_ptr<HealthServer> h(new HealthServer());
  LimitHttpRequests(*h->server_);
  HealthServer* self = h.get();
  AddProbes(*h->server_, [self](std::string* why) {
    bool ready = self->ready_.load();
    *why = ready ? "training" : "joining the job";
    return ready;
  });
  h->port_ =
      port == 0 ? h->server_->bind_to_any_port(host) : (h->server_->bind_to_port(host, port) ? port : -1);
  if (h->port_ <= 0)
    return Status::Unavailable("cannot listen for /healthz on " + host + ":" + std::to_string(port));
  h->thread_ = ServeInBackground(*h->server_);
  return h;
}

}  // namespace tessera::api
