// Deterministic initial values for sparse-table rows created on first touch. The row for
// (seed, table, key) is the same on every pserver and every run, because it depends only on
// those three values and this file's own generator (never std:: distributions, whose output
// may differ between library versions). Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "tessera/params.h"

namespace tessera {

// Fills row[0..dim) for `key` of the table whose name hashes to `table_hash` (Hash64(name)).
void InitRow(const InitializerConfig& init, uint64_t table_hash, uint64_t key, float* row, int dim);

}  // namespace tessera
