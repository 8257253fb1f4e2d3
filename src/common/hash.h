// Stable 64-bit hashing used for placement (dense blocks and sparse keys onto slots) and for
// seeding per-key initializers. The values are part of Tessera's on-disk and on-wire contract:
// every process, on every run and every machine, must get the same numbers, so these functions
// never depend on std::hash or on the platform. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera {

// A strong 64-bit finalizer (splitmix64): every input bit affects every output bit.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Hash of a byte string (FNV-1a over the bytes, then Mix64), with an optional seed.
uint64_t Hash64(std::string_view data, uint64_t seed = 0);

// Combines two hashes; order matters.
constexpr uint64_t HashCombine(uint64_t a, uint64_t b) { return Mix64(a ^ Mix64(b + 0x632be59bd9b4e019ULL)); }

}  // namespace tessera
