// Random identifiers: UUIDs for checkpoint files and member ids. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

// A random (version 4) UUID, e.g. "3f1c2b9e-7a4d-4f0e-9b1a-2c3d4e5f6a7b".
std::string NewUuid();

// 64 random bits from the OS, for seeding.
uint64_t RandomSeed();

}  // namespace tessera
