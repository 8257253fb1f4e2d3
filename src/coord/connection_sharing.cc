// Connection sharing (see connection_sharing.h).
#include "coord/connection_sharing.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>

namespace tessera {
namespace {
std::atomic<int> clients_per_connection{1};
std::atomic<int64_t> clients_made{0};
}  // namespace

void ShareConnectionsAmong(int clients) { clients_per_connection = std::max(1, clients); }

int64_t NextConnectionGroup() {
  const int sharing = clients_per_connection.load();
  return sharing <= 1 ? -1 : clients_made.fetch_add(1) / sharing;
}

void ApplyConnectionGroup(grpc::ChannelArguments* args, int64_t group) {
  if (group < 0) {
    args->SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  } else {
    args->SetInt("tessera.connection_group", static_cast<int>(group));
  }
}

}  // namespace tessera
