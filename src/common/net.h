// Small network helpers. Thread-safe.
#pragma once

namespace tessera {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
int FreeLoopbackPort();

}  // namespace tessera
