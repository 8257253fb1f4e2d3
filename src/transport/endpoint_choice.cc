// Endpoint choice (see endpoint_choice.h).
#include "transport/endpoint_choice.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/net.h"

namespace tessera {
namespace {

std::string Offered(const PserverEndpoints& e) {
  std::string out;
  for (const auto& [k, v] : e.endpoints) out += (out.empty() ? "" : ", ") + TransportKindName(k);
  return out.empty() ? "nothing" : out;
}

}  // namespace

StatusOr<PserverEndpoints> ParsePserverEndpoints(std::string_view registration) {
  auto j = nlohmann::json::parse(registration, nullptr, false);
  if (!j.is_object()) return Status::InvalidArgument("pserver registration is not a JSON object");
  PserverEndpoints out;
  if (j.contains("host_id") && j["host_id"].is_string()) out.host_id = j["host_id"];
  if (j.contains("endpoints") && j["endpoints"].is_object()) {
    for (const auto& [name, v] : j["endpoints"].items()) {
      auto kind = ParseTransportKind(name);
      if (!kind.ok() || *kind == TransportKind::kAuto || !v.is_string() || v.get<std::string>().empty()) continue;
      out.endpoints[*kind] = v.get<std::string>();
    }
  } else if (j.contains("address") && j["address"].is_string()) {
    out.endpoints[TransportKind::kGrpc] = j["address"];
  }
  if (out.endpoints.empty()) return Status::InvalidArgument("pserver registration names no endpoint");
  return out;
}

StatusOr<EndpointChoice> ChooseEndpoint(const PserverEndpoints& offered, TransportKind wanted,
                                        const std::string& my_host_id, TransportKind excluded) {
  const bool same_host = !my_host_id.empty() && offered.host_id == my_host_id;
  auto has = [&](TransportKind k) { return k != excluded && offered.endpoints.count(k) > 0; };
  if (wanted == TransportKind::kAuto) {
    if (same_host && has(TransportKind::kShm))
      return EndpointChoice{TransportKind::kShm, offered.endpoints.at(TransportKind::kShm)};
    for (TransportKind k : {TransportKind::kTcp, TransportKind::kGrpc}) {
      if (has(k)) return EndpointChoice{k, offered.endpoints.at(k)};
    }
    return Status::FailedPrecondition("the pserver offers no transport this trainer can use (it offers " +
                                      Offered(offered) + ")");
  }
  if (!has(wanted)) {
    return Status::FailedPrecondition("transport " + TransportKindName(wanted) +
                                      " was asked for, but the pserver offers " + Offered(offered));
  }
  if (wanted == TransportKind::kShm && !same_host) {
    return Status::FailedPrecondition("transport shm was asked for, but the pserver runs on another host (" +
                                      (offered.host_id.empty() ? std::string("unknown") : offered.host_id) +
                                      "; this trainer is on " + my_host_id + ")");
  }
  return EndpointChoice{wanted, offered.endpoints.at(wanted)};
}

std::string HostIdentity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  char ns[128] = {0};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  return HostName() + "/" + boot + "/" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "net:?");
}

}  // namespace tessera
