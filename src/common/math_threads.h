// How many threads a trainer's math libraries may start when several busy processes share a
// host. OpenBLAS (under numpy and Debian's PyTorch) starts one thread per core whatever
// torch.set_num_threads says, and its idle threads spin in sched_yield between calls: two
// trainers and a pserver on two cores then fight over them (measured in bench/README.md).
// Launchers give each trainer its share of the cores through the variables these libraries
// read when they load, unless the user set any of them. Pure.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

// The variables read by OpenMP (and PyTorch's own pool), OpenBLAS and MKL.
inline constexpr const char* kMathThreadVars[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                  "MKL_NUM_THREADS"};

// {var, max(1, cores / processes)} for each of kMathThreadVars, when `processes` busy processes
// share `cores` cores; nothing when `processes` is unknown (<= 0) or the environment (`getenv`)
// already sets any of them: the user chose.
std::vector<std::pair<std::string, std::string>> MathThreadEnv(
    int cores, int processes, const std::function<const char*(const char*)>& getenv);

// The cores this process may use (hardware threads it may run on, cut to its control group's CPU
// quota: cpu_quota.h; 0 if unknown): what launchers divide among a host's trainers and pservers,
// here and for busy polling (busy_poll.h). Not pure: it asks the system.
int HostCores();

}  // namespace tessera
