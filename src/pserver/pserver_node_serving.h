// What PserverNode::Run has set up (etcd, the job, the lease, the transports' handler) when it
// hands over to RunReplicated (pserver_node_replicas.cc). Internal to the pserver node.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "coord/etcd_client.h"
#include "coord/lease_keeper.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "pserver/pserver_node.h"
#include "transport/transport.h"

namespace tessera {

struct PserverNode::Serving {
  etcd::EtcdClient* etcd;
  const JobConfig& config;
  const SlotMap& slots;
  LeaseKeeper* keeper;
  const TransportOptions& transport;
  const nlohmann::json& info;  // this process's registration (address, endpoints, pid)
  std::function<void(RequestHandler*)> install;
  metrics::Registry* prom;
};

}  // namespace tessera
