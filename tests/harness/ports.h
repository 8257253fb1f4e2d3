// Free loopback TCP ports for tests (see common/net.h). Test-only.
#pragma once

#include "common/net.h"

namespace tessera::testing {

inline int FreePort() { return FreeLoopbackPort(); }

}  // namespace tessera::testing
