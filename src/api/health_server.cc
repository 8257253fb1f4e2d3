// A trainer's probe endpoints (see health_server.h).
#include "api/health_server.h"

#include <httplib.h>

#include "common/http_limits.h"

namespace tessera::api {

HealthServer::HealthServer() : server_(std::make_unique<httplib::Server>()) {}

HealthServer::~HealthServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& host, int port) {
  std::unique_ptr<HealthServer> h(new HealthServer());
  LimitHttpRequests(*h->server_);
  h->server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  HealthServer* self = h.get();
  h->server_->Get("/readyz", [self](const httplib::Request&, httplib::Response& res) {
    bool ready = self->ready_.load();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "training\n" : "joining the job\n", "text/plain");
  });
  h->port_ = port == 0 ? h->server_->bind_to_any_port(host) : (h->server_->bind_to_port(host, port) ? port : -1);
  if (h->port_ <= 0)
    return Status::Unavailable("cannot listen for /healthz on " + host + ":" + std::to_string(port));
  h->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return h;
}

}  // namespace tessera::api
