// An etcd client of the etcd a bench started (plain: no TLS, no users). Bench-only.
#pragma once

#include <memory>
#include <string>

#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera::bench {

inline StatusOr<std::unique_ptr<etcd::EtcdClient>> EtcdClientOf(const std::string& endpoint) {
  etcd::EtcdOptions eo;
  eo.endpoints = {endpoint};
  return etcd::EtcdClient::Create(eo);
}

}  // namespace tessera::bench
