// The addressing flags of the serving commands (pserver, master): --host, or --listen and
// --advertise, with TESSERA_ADVERTISE and POD_IP from the environment, resolved by the rules of
// common/addressing.h. Used only by src/cli.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/addressing.h"

namespace tessera::cli {

struct AddressFlags {
  std::string host, listen, advertise;
};

void AddAddressFlags(CLI::App* cmd, AddressFlags* flags);

// Reads the environment and the route toward etcd, then applies the rules; logs the choice.
StatusOr<NodeAddress> ResolveAddressFlags(const AddressFlags& flags, const std::vector<std::string>& etcd);

}  // namespace tessera::cli
