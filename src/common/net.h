// Small network helpers. Thread-safe.
#pragma once

#include <netdb.h>

#include <chrono>
#include <memory>
#include <string>

#include "tessera/status.h"

namespace tessera {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
int FreeLoopbackPort();
// A free port P with P + 1 free as well (on every interface a moment ago), e.g. etcd's client and
// peer ports; 0 when none was found in 50 tries.
int FreePortPair();

// "host:port" (or "[v6]:port") resolved for a TCP connection: InvalidArgument for a malformed
// address, Unavailable("cannot resolve host 'h': ...") for a name that does not resolve.
using AddrInfoList = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;
StatusOr<AddrInfoList> ResolveTcp(const std::string& address);

// Whether something accepts TCP connections at "host:port" within `timeout`: OK, or Unavailable
// saying why in words a person can act on: the host name does not resolve, the connection was
// refused (nothing listens there), or nothing answered in time.
Status ProbeTcp(const std::string& address, std::chrono::milliseconds timeout);

// The local address this host would send from toward "host:port" (a UDP socket connected there,
// then asked its own name; nothing is sent). Unavailable when the host does not resolve or no
// route leads there.
StatusOr<std::string> SourceAddressToward(const std::string& address);

// This machine's host name (gethostname), or "unknown" when it cannot be read.
std::string HostName();

}  // namespace tessera
