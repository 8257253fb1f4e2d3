// Stable hashing (see hash.h).
#include "common/hash.h"

namespace tessera {

uint64_t Hash64(std::string_view data, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ Mix64(seed);
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h ^ data.size());
}

}  // namespace tessera
