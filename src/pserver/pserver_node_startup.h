// PserverNode::Startup: what a pserver process sets up before it serves anything, in named
// phases (pserver_node.cc): Connect (etcd, the job's configuration, slot map, secret and TLS),
// Listen (the data-plane transports, answering "starting up" until a service is installed),
// KeepLease, and ServeHttp (/metrics, /stats, the probes). It owns them for the run and, when
// destroyed, stops the HTTP endpoints, the lease keeper and the transports, in that order.
// Then OneIndex or ReplicatedHost serves (pserver_node_parts.h). Internal to the pserver node.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/node_http.h"
#include "coord/etcd_client.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "pserver/pserver_node.h"
#include "pserver/pserver_service.h"
#include "transport/transport.h"

namespace tessera {

class PserverNode::Startup {
 public:
  explicit Startup(PserverNode* node) : node_(node) {}
  ~Startup();

  Status Connect();
  Status Listen();
  Status KeepLease();
  Status ServeHttp();

  // Claims an index below `count` in `registry` (--index, else the lowest free one) with this
  // process's registration, waiting while it is taken (saying `waiting` every 10 s); nullopt if
  // Stop() came first.
  StatusOr<std::optional<Claim>> ClaimWhenFree(Registry& registry, int count, const std::string& waiting);

  // The service whose counters /metrics and /stats show and which the lease's state stops and
  // resumes (one index's; none for a replicated host's several).
  void ShowService(PserverService* service);
  // Installs the handler of the data plane's requests (null: "starting up" again).
  void Install(RequestHandler* handler);
  void StopTransports();

  PserverNode* node() const { return node_; }
  const std::string& job() const { return node_->options_.job; }
  const PserverOptions& options() const { return node_->options_; }
  etcd::EtcdClient* etcd() const { return etcd_.get(); }
  const JobConfig& config() const { return config_; }
  const SlotMap& slots() const { return slots_; }
  LeaseKeeper* keeper() const { return keeper_.get(); }
  const TransportOptions& transport() const { return transport_; }
  // This process's registration (address, endpoints, pid, metrics URL).
  const nlohmann::json& info() const { return info_; }
  const std::string& address() const { return address_; }
  // "tcp 127.0.0.1:1234, shm ...": the endpoints served, for the log.
  std::string EndpointsText() const;
  metrics::Registry* prom() { return &prom_; }

 private:
  class Forwarder;
  void OnLease(LeaseState s);

  PserverNode* node_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  JobConfig config_;
  SlotMap slots_;
  metrics::Registry prom_;
  TransportOptions transport_;  // with the job's secret and TLS
  std::unique_ptr<Forwarder> forwarder_;
  std::vector<std::unique_ptr<ServerTransport>> servers_;
  nlohmann::json endpoints_ = nlohmann::json::object();
  std::string advertise_, address_;
  nlohmann::json info_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::mutex service_mu_;                   // guards service_ against the lease and the HTTP threads
  PserverService* service_ = nullptr;       // guarded by service_mu_
  PserverService::Counters last_counters_;  // guarded by service_mu_
  std::unique_ptr<NodeHttp> http_;
};

}  // namespace tessera
