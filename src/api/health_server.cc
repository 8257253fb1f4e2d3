// A trainer's probe endpoints (see health_server.h).
#include "api/health_server.h"

#include <httplib.h>

#include "common/http_probes.h"
#include "common/node_http.h"

namespace tessera::api {

HealthServer::HealthServer() : http_(std::make_unique<NodeHttp>()) {}

HealthServer::~HealthServer() = default;

StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& host, int port) {
  std::unique_ptr<HealthServer> h(new HealthServer());
  HealthServer* self = h.get();
  AddProbes(h->http_->server(), [self](std::string* why) {
    bool ready = self->ready_.load();
    *why = ready ? "training" : "joining the job";
    return ready;
  });
  TESSERA_ASSIGN_OR_RETURN(h->port_, h->http_->Listen(host, port, "/healthz"));
  return h;
}

}  // namespace tessera::api
