// Free loopback TCP ports for tests. Test-only.
#pragma once

namespace tessera::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
int FreePort();

}  // namespace tessera::testing
