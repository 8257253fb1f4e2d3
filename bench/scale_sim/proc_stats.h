// What /proc says of a process: its CPU time and its resident memory (scale_sim's figures).
#pragma once

#include <sys/types.h>

namespace tessera::bench {

// A process's CPU seconds (user + system) from /proc/PID/stat, or -1.
double CpuSeconds(pid_t pid);
// A process's resident memory in MiB, or -1.
double ResidentMiB(pid_t pid);

}  // namespace tessera::bench
