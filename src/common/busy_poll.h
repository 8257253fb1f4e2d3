// Busy polling on the data plane (TransportOptions::busy_poll): a trainer waiting for its reply,
// and a pserver connection waiting for the next request, check for it without sleeping for a
// while first. Where idle cores halt (a VM's vCPUs), waking a sleeping thread costs about 50 us,
// twice a step (bench/README.md); polling keeps the core awake. A poller yields its core to
// any thread ready to run there, and polls only while nothing else of the data plane is under
// way in its process (transport/stream_io.h), but it still holds a core the system cannot idle:
// launchers turn it on for a host's trainers and pservers only when each has a core of its own,
// through the environment (TESSERA_BUSY_POLL_US, which trainers and `tessera pserver` read),
// unless the user chose. Pure.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "tessera/status.h"

namespace tessera {

// How long a wait polls when a launcher turns polling on: about a small model's step (the mlp's
// compute is 0.5 ms); a longer wait sleeps after it, where its wake-up matters less.
inline constexpr int kBusyPollMicros = 1000;
inline constexpr int kMaxBusyPollMicros = 100000;

// TESSERA_BUSY_POLL_US's value for the trainers and pservers of one host, or nothing (leave the
// environment as it is):
//  - `chosen` >= 0 (the user's --busy-poll-us): that;
//  - else nothing when the environment (`getenv`) sets the variable: the user chose;
//  - else kBusyPollMicros when `processes` (the host's trainers and pservers, > 0) have a core
//    each (`processes` <= `cores`), 0 when not, nothing when `processes` is unknown.
std::optional<int> HostBusyPoll(int chosen, int cores, int processes,
                                const std::function<const char*(const char*)>& getenv);

// TESSERA_BUSY_POLL_US as the environment (`getenv`) sets it: unset or "" is 0; else a whole
// number of microseconds up to kMaxBusyPollMicros, or InvalidArgument naming the variable.
StatusOr<std::chrono::microseconds> BusyPollFromEnvironment(
    const std::function<const char*(const char*)>& getenv);

}  // namespace tessera
