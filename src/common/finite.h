// The scan for non-finite floats (NaN, infinity) in a buffer, at about the speed of reading the
// memory: trainers run it over every gradient before sending, pservers over every push before
// applying it. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

class WorkPool;

// The index of the first NaN or infinity among x[0..n), or -1.
int64_t FirstNonFinite(const float* x, size_t n);
// The same, with the scan of a large buffer (a million floats and up) shared by `pool`'s threads
// (null: this thread alone).
int64_t FirstNonFinite(const float* x, size_t n, WorkPool* pool);

// What a trainer and a pserver say of a gradient with a NaN or an infinity at `where` ("'w'
// element 7", "'emb' row of key 42"): one wording, whichever of them found it, so a pserver's
// finding reaches the trainer's log and its caller as is.
std::string NonFiniteGradient(const std::string& where);

}  // namespace tessera
