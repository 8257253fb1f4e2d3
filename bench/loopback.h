// Loopback TCP bandwidth, the limit a data-plane figure is read against: Debian's iperf3 with
// 1 MiB writes on 127.0.0.1 (the same measurement the issues quote). Bench-only.
#pragma once

#include <string>

#include "tessera/status.h"

namespace tessera::bench {

// Runs an iperf3 server and client on a free loopback port for `seconds`; returns bytes/s.
StatusOr<double> MeasureIperf3(double seconds = 3.0);

}  // namespace tessera::bench
