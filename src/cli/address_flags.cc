// Addressing flags of the serving commands (see address_flags.h).
#include "cli/address_flags.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "common/net.h"

namespace tessera::cli {

void AddAddressFlags(CLI::App* cmd, AddressFlags* f) {
  auto* g = cmd->add_option_group("Addresses",
                                  "Where this node listens and which address its peers are told (registered in etcd).\n"
                                  "Default: TESSERA_ADVERTISE, else POD_IP, else this host's address toward etcd when\n"
                                  "etcd is on another host, else 127.0.0.1; a node never advertises 0.0.0.0, nor\n"
                                  "loopback while etcd is elsewhere.");
  g->add_option("--host", f->host, "listen on and advertise this address (one-host shorthand)");
  g->add_option("--listen", f->listen, "address to bind (0.0.0.0: every interface; default: the advertised one)");
  g->add_option("--advertise", f->advertise, "address peers connect to (this host's, as they reach it)");
}

StatusOr<NodeAddress> ResolveAddressFlags(const AddressFlags& f, const std::vector<std::string>& etcd) {
  AddressInputs in;
  in.host = f.host;
  in.listen = f.listen;
  in.advertise = f.advertise;
  if (const char* v = std::getenv("TESSERA_ADVERTISE")) in.env_advertise = v;
  if (const char* v = std::getenv("POD_IP")) in.env_pod_ip = v;
  in.etcd_endpoints = etcd;
  for (const auto& e : etcd) {
    if (IsLoopbackHost(e)) continue;
    if (auto src = SourceAddressToward(e); src.ok()) in.route_to_etcd = *src;
    break;
  }
  TESSERA_ASSIGN_OR_RETURN(NodeAddress a, ResolveNodeAddress(in));
  spdlog::info("listening on {}, advertising {} (from {})", a.listen, a.advertise, a.reason);
  return a;
}

}  // namespace tessera::cli
