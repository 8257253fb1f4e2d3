// PserverNode (see pserver_node.h): Run, its start-up phases (PserverNode::Startup,
// pserver_node_startup.h), and the stop and loss signals the phases share.
#include "pserver/pserver_node.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/addressing.h"
#include "common/clock.h"
#include "common/http_probes.h"
#include "job/job_store.h"
#include "pserver/pserver_node_metrics.h"
#include "pserver/pserver_node_parts.h"
#include "pserver/pserver_node_startup.h"
#include "security/http_token.h"
#include "transport/endpoint_choice.h"
#include "transport/transport_factory.h"

namespace tessera {

// Answers NOT_SERVING until the real service is installed (the transport must listen before the
// pserver can advertise its address and claim an index).
class PserverNode::Startup::Forwarder : public RequestHandler {
 public:
  void Install(RequestHandler* s) { service_.store(s); }
  RequestWatcher* Watch(std::string_view header, size_t payload_bytes) override {
    RequestHandler* s = service_.load();
    return s ? s->Watch(header, payload_bytes) : nullptr;
  }
  void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> r) override {
    RequestHandler* s = service_.load();
    if (s) return s->Handle(header, payload, std::move(r));
    wire::DataReply reply;
    reply.set_code(static_cast<int>(StatusCode::kUnavailable));
    reply.set_message("pserver is starting up");
    reply.set_reason(wire::DataReply::NOT_SERVING);
    std::string h = reply.SerializeAsString();
    r->Send(h, {});
  }

 private:
  std::atomic<RequestHandler*> service_{nullptr};
};

PserverNode::PserverNode(PserverOptions options) : options_(std::move(options)) {}
PserverNode::~PserverNode() { Stop(); }

void PserverNode::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool PserverNode::MarkLost(Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_) return false;
  lost_ = true;
  lost_reason_ = std::move(why);
  cv_.notify_all();
  return true;
}

bool PserverNode::stop_requested() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

bool PserverNode::WaitForStop(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [&] { return stop_; });
}

Status PserverNode::Run() {
  Startup up(this);
  TESSERA_RETURN_IF_ERROR(up.Connect());
  TESSERA_RETURN_IF_ERROR(up.Listen());
  TESSERA_RETURN_IF_ERROR(up.KeepLease());
  TESSERA_RETURN_IF_ERROR(up.ServeHttp());
  prom_ = up.prom();
  Status result = up.config().hosted() ? ReplicatedHost(&up).Run() : OneIndex(&up).Run();
  prom_ = nullptr;
  return result;
}

PserverNode::Startup::~Startup() {
  if (http_) http_->Stop();
  if (keeper_) keeper_->Stop();
  StopTransports();
}

Status PserverNode::Startup::Connect() {
  const PserverOptions& o = options();
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(o.etcd));
  TESSERA_ASSIGN_OR_RETURN(config_, LoadJobConfig(etcd_.get(), job()));
  TESSERA_ASSIGN_OR_RETURN(slots_, LoadSlotMap(etcd_.get(), job()));
  TESSERA_ASSIGN_OR_RETURN(transport_.secret, LoadJobSecret(etcd_.get(), job(), config_, o.secret_file));
  TESSERA_ASSIGN_OR_RETURN(transport_.tls,
                           LoadJobTls(job(), config_, o.tls_ca_file, o.tls_cert_file, o.tls_key_file));
  return Status::OK();
}

// auto serves every transport: each trainer takes the best one it can reach. --port goes to the
// main transport (tcp when served); the others take free ports.
Status PserverNode::Startup::Listen() {
  const PserverOptions& o = options();
  TESSERA_ASSIGN_OR_RETURN(TransportKind kind, ParseTransportKind(o.transport));
  std::vector<TransportKind> kinds =
      kind == TransportKind::kAuto
          ? std::vector<TransportKind>{TransportKind::kTcp, TransportKind::kShm, TransportKind::kGrpc}
          : std::vector<TransportKind>{kind};
  advertise_ = o.advertise.empty() ? o.host : o.advertise;
  transport_.limits.max_payload = o.max_message_bytes;
  transport_.busy_poll = o.busy_poll;
  // Requests without the job's secret are refused and counted (served in /metrics).
  transport_.auth_refused =
      &prom_.GetCounter("tessera_pserver_auth_refused_total",
                        "Data-plane requests and connections refused for lacking the job's secret");
  forwarder_ = std::make_unique<Forwarder>();
  for (TransportKind k : kinds) {
    auto server = NewServerTransport(k, transport_);
    TESSERA_RETURN_IF_ERROR(server->Start(o.host, servers_.empty() ? o.port : 0, forwarder_.get()));
    endpoints_[TransportKindName(k)] = AdvertisedEndpoint(server->endpoint(), advertise_);
    servers_.push_back(std::move(server));
  }
  address_ = AdvertisedEndpoint(servers_[0]->endpoint(), advertise_);
  info_ = {{"address", address_},       {"host", advertise_},      {"pid", static_cast<int64_t>(::getpid())},
           {"transport", o.transport},  {"endpoints", endpoints_}, {"host_id", HostIdentity()},
           {"started_ms", WallMillis()}};
  if (!o.checkpoint_dir.empty()) info_["checkpoint_dir"] = o.checkpoint_dir;
  return Status::OK();
}

Status PserverNode::Startup::KeepLease() {
  TESSERA_ASSIGN_OR_RETURN(keeper_, LeaseKeeper::Start(etcd_.get(), {options().lease_ttl_seconds, {}},
                                                       [this](LeaseState s) { OnLease(s); }));
  return Status::OK();
}

// A lease in doubt stops the service at once; alive again resumes it; lost ends the run.
void PserverNode::Startup::OnLease(LeaseState s) {
  {
    std::lock_guard<std::mutex> lock(service_mu_);
    if (s == LeaseState::kAlive) {
      if (service_) service_->ResumeServing();
      return;
    }
    if (service_)
      service_->StopServing(Status::Unavailable(std::string("its lease is ") + LeaseStateName(s)));
  }
  if (s == LeaseState::kLost) node_->MarkLost(Status::Aborted("lease lost"));
}

// Served before the claim, so that their address goes into the registration. They bind to
// loopback unless told otherwise; anywhere else they ask for the job's console token
// (common/http_access.h).
Status PserverNode::Startup::ServeHttp() {
  const PserverOptions& o = options();
  if (o.http_port < 0) return Status::OK();
  const std::string http_host = o.http_host.empty() ? "127.0.0.1" : o.http_host;
  TESSERA_ASSIGN_OR_RETURN(auto access, security::HttpAccessFor(http_host, transport_.secret, job()));
  http_ = std::make_unique<NodeHttp>(std::move(access));
  httplib::Server& http = http_->server();
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(service_mu_);
      if (service_) RefreshMetrics(*service_, prom_, &last_counters_, node_->last_checkpoint_ms_.load());
    }
    res.set_content(prom_.Render(), "text/plain; version=0.0.4");
  });
  // Probes: alive while the process answers; ready while it serves an index (a host of a
  // replicated or elastic job: once it has its host index).
  AddProbes(http, [this](std::string* why) {
    const int index = node_->index_.load();
    std::lock_guard<std::mutex> lock(service_mu_);
    if (config_.hosted()) {
      *why = index >= 0 ? "pserver host " + std::to_string(index) : "no host index yet";
      return index >= 0;
    }
    const bool serving = service_ != nullptr && index >= 0;
    *why = serving ? "serving index " + std::to_string(index) : "no index served yet";
    return serving;
  });
  // For the console's nodes panel (the master asks).
  http.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
    const int index = node_->index_.load();
    nlohmann::json j = {{"index", index}};
    {
      std::lock_guard<std::mutex> lock(service_mu_);
      if (service_) j.update(StatsJson(service_->counters(), index >= 0 ? slots_.SlotsOf(index).size() : 0));
    }
    res.set_content(j.dump(), "application/json");
  });
  TESSERA_ASSIGN_OR_RETURN(int port, http_->Listen(http_host, o.http_port, "/metrics"));
  info_["metrics"] = NodeHttp::AdvertisedUrl(http_host, port, o.host, advertise_) + "/metrics";
  return Status::OK();
}

void PserverNode::Startup::ShowService(PserverService* service) {
  std::lock_guard<std::mutex> lock(service_mu_);
  service_ = service;
  if (service_ && keeper_->state() != LeaseState::kAlive)
    service_->StopServing(Status::Unavailable("its lease is in doubt"));
}

void PserverNode::Startup::Install(RequestHandler* handler) { forwarder_->Install(handler); }

void PserverNode::Startup::StopTransports() {
  for (auto& s : servers_) s->Shutdown();
}

std::string PserverNode::Startup::EndpointsText() const {
  std::string served;
  for (const auto& [k, v] : endpoints_.items())
    served += (served.empty() ? "" : ", ") + k + " " + v.get<std::string>();
  return served;
}

}  // namespace tessera
