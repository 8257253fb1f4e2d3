// Connection sharing, for a simulation of many processes in one (bench/scale_sim): by default
// every client (an EtcdClient, a MasterClient) gets a TCP connection of its own, as it would in a
// process of its own. After ShareConnectionsAmong(k), every k clients made from then on share one
// connection per address, each keeping its own calls, streams and watches: gRPC's global pool
// keys a connection by its address and channel arguments, and the group's number is one of them.
#pragma once

#include <grpcpp/support/channel_arguments.h>

#include <cstdint>

namespace tessera {

// From now on, every `clients` clients share their connections (1: none shares).
void ShareConnectionsAmong(int clients);

// The group of the next client (all its channels use it); -1 when clients do not share.
int64_t NextConnectionGroup();

// Gives a channel made with `args` a connection of its own (group -1) or its group's.
void ApplyConnectionGroup(grpc::ChannelArguments* args, int64_t group);

}  // namespace tessera
