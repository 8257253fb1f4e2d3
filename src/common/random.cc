// Random identifiers (see random.h), from OpenSSL's CSPRNG.
#include "common/random.h"

#include <openssl/rand.h>

#include <cstdio>

#include "common/logging.h"

namespace tessera {

std::string NewUuid() {
  unsigned char b[16];
  TESSERA_CHECK(RAND_bytes(b, sizeof b) == 1);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  char out[37];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

uint64_t RandomSeed() {
  uint64_t v = 0;
  TESSERA_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof v) == 1);
  return v;
}

}  // namespace tessera
