// Listen and advertise addresses of a node (see addressing.h).
#include "common/addressing.h"

#include <algorithm>
#include <cstdlib>

namespace tessera {

std::string HostOf(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  // More than one colon and no brackets: a bare IPv6 address.
  if (std::count(address.begin(), address.end(), ':') > 1) return address;
  return address.substr(0, address.find(':'));
}

bool IsLoopbackHost(const std::string& host) {
  std::string h = HostOf(host);
  return h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0;
}

bool IsWildcardHost(const std::string& host) {
  std::string h = HostOf(host);
  return h.empty() || h == "0.0.0.0" || h == "::";
}

std::string JoinHostPort(const std::string& host, int port) {
  std::string h = HostOf(host);
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

std::string AdvertisedEndpoint(const std::string& bound_endpoint, const std::string& advertise) {
  if (bound_endpoint.empty() || bound_endpoint.front() == '@') return bound_endpoint;
  auto colon = bound_endpoint.rfind(':');
  if (colon == std::string::npos) return bound_endpoint;
  return JoinHostPort(advertise, std::atoi(bound_endpoint.c_str() + colon + 1));
}

StatusOr<NodeAddress> ResolveNodeAddress(const AddressInputs& in) {
  if (!in.host.empty() && (!in.listen.empty() || !in.advertise.empty())) {
    return Status::InvalidArgument(
        "--host sets both the listening and the advertised address; give either --host, or --listen "
        "and --advertise");
  }
  bool etcd_elsewhere = false;
  std::string remote_etcd;
  for (const auto& e : in.etcd_endpoints) {
    if (!IsLoopbackHost(e)) {
      etcd_elsewhere = true;
      remote_etcd = e;
      break;
    }
  }
  NodeAddress out;
  if (!in.advertise.empty()) {
    out = {"", in.advertise, "--advertise"};
  } else if (!in.host.empty()) {
    out = {"", in.host, "--host"};
  } else if (!in.env_advertise.empty()) {
    out = {"", in.env_advertise, "TESSERA_ADVERTISE"};
  } else if (!in.env_pod_ip.empty()) {
    out = {"", in.env_pod_ip, "POD_IP"};
  } else if (!in.listen.empty() && !IsWildcardHost(in.listen)) {
    out = {"", in.listen, "--listen"};
  } else if (etcd_elsewhere && !in.route_to_etcd.empty()) {
    out = {"", in.route_to_etcd, "the route toward etcd at " + remote_etcd};
  } else if (etcd_elsewhere) {
    return Status::InvalidArgument("etcd is at " + remote_etcd +
                                   ", on another host, and no address of this host was given for its "
                                   "peers: pass --advertise ADDRESS (or --host ADDRESS)");
  } else {
    out = {"", "127.0.0.1", "the default (etcd is on this host)"};
  }
  out.listen = !in.listen.empty() ? in.listen : !in.host.empty() ? in.host : out.advertise;
  out.advertise = HostOf(out.advertise);
  out.listen = HostOf(out.listen);

  if (IsWildcardHost(out.advertise)) {
    return Status::InvalidArgument("cannot advertise '" + out.advertise + "' (from " + out.reason +
                                   "): it is a wildcard, which no peer can connect to; pass --advertise "
                                   "with this host's address, and --listen 0.0.0.0 if you want to bind "
                                   "every interface");
  }
  if (IsLoopbackHost(out.advertise) && etcd_elsewhere) {
    return Status::InvalidArgument("would advertise the loopback address " + out.advertise + " (from " +
                                   out.reason + ") while etcd is at " + remote_etcd +
                                   ", so peers on other hosts could not reach this node; pass --advertise "
                                   "with this host's address (or --host)");
  }
  if (IsLoopbackHost(out.listen) && !IsLoopbackHost(out.advertise)) {
    return Status::InvalidArgument("listens on the loopback address " + out.listen + " but advertises " +
                                   out.advertise +
                                   ": peers would be refused; pass --listen with that address (or 0.0.0.0)");
  }
  return out;
}

}  // namespace tessera
