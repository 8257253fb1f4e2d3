// FrameMac (see frame_mac.h).
#include "security/frame_mac.h"

#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessera::security {

Nonce NewNonce() {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    std::fprintf(stderr, "tessera: the random source failed (RAND_bytes)\n");
    std::abort();
  }
  return n;
}

void FrameMac::Tag(const uint8_t* preamble, size_t preamble_len, std::string_view header,
                   uint8_t out[kFrameTagBytes]) {
  uint8_t full[32];
  hmac_.Begin();
  hmac_.Update(nonce_.data(), nonce_.size());
  hmac_.Update(preamble, preamble_len);
  hmac_.Update(header);
  hmac_.Finish(full);
  std::memcpy(out, full, kFrameTagBytes);
}

bool FrameMac::Check(const uint8_t* preamble, size_t preamble_len, std::string_view header,
                     const uint8_t tag[kFrameTagBytes]) {
  uint8_t want[kFrameTagBytes];
  Tag(preamble, preamble_len, header, want);
  return ConstantTimeEqual(want, tag, kFrameTagBytes);
}

}  // namespace tessera::security
