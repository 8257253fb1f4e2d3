// Server-side kernels: one optimizer update of a contiguous run of parameters, in place, from a
// gradient buffer, with no temporary arrays (formulas in tessera/params.h). (The scan for
// non-finite gradients is common/finite.h.)
// Pure functions; thread-safe for disjoint memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/params.h"

namespace tessera {

// Updates w[0..n) from the gradient sum g[0..n) scaled by `scale` (1 / sample count).
// s1, s2: the optimizer's state arrays (momentum/adagrad: s1; adam: s1 = m, s2 = v; ftrl: s1 = z,
// s2 = n); unused ones
// may be null. `t`: adam's step number for this update, starting at 1. Denormal inputs and
// results are taken as zero (common/denormals.h), the same on every thread and machine.
// `out`: where the new values also go (a pull reply waiting for them), written in the same pass;
// null: nowhere else.
void ApplyUpdate(const OptimizerConfig& c, float* w, const float* g, float scale, size_t n, float* s1,
                 float* s2, int64_t t, float* out = nullptr);

// Sets a fresh state array's initial values (adagrad's accumulator starts at initial_accumulator).
void InitState(const OptimizerConfig& c, float* s1, float* s2, size_t n);

}  // namespace tessera
