// Loopback TCP ports for tests (see common/net.h): free ones, and the connections made to one.
// Test-only.
#pragma once

#include "common/net.h"

namespace tessera::testing {

inline int FreePort() { return FreeLoopbackPort(); }

// How many TCP connections to this machine's `port` are established now, as the kernel lists
// them (/proc/net/tcp and tcp6): each connection counted once, from its listening end.
int ConnectionsTo(int port);

}  // namespace tessera::testing
