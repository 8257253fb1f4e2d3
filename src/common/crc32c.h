// CRC32C (Castagnoli), used by RecordIO chunk headers and the data-plane frames.
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

// Extends `crc` (the CRC32C of earlier bytes, 0 to start) with `size` bytes of `data`.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

}  // namespace tessera
