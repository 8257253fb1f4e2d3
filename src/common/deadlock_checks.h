// absl's deadlock checks, off for a whole process. gRPC's mutexes are absl::Mutex, and Debian's
// absl is built with its debug default: every lock taken is recorded in a graph of lock orders
// (GraphCycles), and a cycle aborts the process. That bookkeeping was a quarter of a simulated
// trainer's CPU in a join (bench/scale_sim) and is paid by every Tessera process on every gRPC
// call; an order it dislikes in gRPC's own code would abort a pserver mid-job. Tessera's own
// locks are std::mutex (common/mutex.h), which absl never sees. Each process's entry calls this
// once (the tessera command, api::Session for Python and the C API); it is idempotent.
#pragma once

namespace tessera {

void TurnOffDeadlockChecks();

}  // namespace tessera
