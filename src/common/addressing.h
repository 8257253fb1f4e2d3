// Where a node listens and which address it tells its peers: the one decision every node that
// serves (pserver, master) makes before it binds, kept apart from the sockets so it can be tested
// on its own. A node never registers a wildcard address, nor a loopback one when etcd (and so its
// peers) are on other hosts; it refuses to start with a message saying which flag to give.
#pragma once

#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

struct AddressInputs {
  std::string host;        // --host: listen on and advertise this address (the single-host flag)
  std::string listen;      // --listen: bind here (may be 0.0.0.0 or ::)
  std::string advertise;   // --advertise: tell peers this address
  std::string env_advertise;  // TESSERA_ADVERTISE
  std::string env_pod_ip;     // POD_IP (Kubernetes' downward API)
  std::vector<std::string> etcd_endpoints;  // host:port of each etcd member
  // This host's source address toward the first etcd endpoint (the address its peers most likely
  // reach it at); empty when unknown. Only used when nothing else names an address.
  std::string route_to_etcd;
};

struct NodeAddress {
  std::string listen;     // the address to bind
  std::string advertise;  // the address registered in etcd
  std::string reason;     // where `advertise` came from, for the start-up log
};

// The rules, in order:
//   advertise: --advertise, --host, TESSERA_ADVERTISE, POD_IP, --listen when it is a specific
//              address, the route toward etcd when etcd is not on loopback, else 127.0.0.1;
//   listen:    --listen, --host, else the advertised address.
// Refused: --host with --listen or --advertise; advertising a wildcard; advertising loopback while
// etcd is elsewhere; listening on loopback while advertising another address.
StatusOr<NodeAddress> ResolveNodeAddress(const AddressInputs& in);

// The host part of "host:port", "[v6]:port" or a bare host (brackets removed).
std::string HostOf(const std::string& address);
bool IsLoopbackHost(const std::string& host);  // 127.0.0.0/8, ::1, localhost; with a port or not
bool IsWildcardHost(const std::string& host);  // 0.0.0.0, ::, [::], empty

// "host:port", with an IPv6 host in brackets.
std::string JoinHostPort(const std::string& host, int port);

// An endpoint a server reports after binding `listen` ("10.0.0.1:7000", or "@name" for shared
// memory), with its host replaced by the advertised one. "@name" is returned unchanged.
std::string AdvertisedEndpoint(const std::string& bound_endpoint, const std::string& advertise);

}  // namespace tessera
