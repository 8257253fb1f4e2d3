// The MAC of a data-plane frame (TCP and shared memory; transport/frame.h places it). A server
// greets every new connection with a random nonce; after that each frame in either direction
// carries tag = HMAC-SHA256(key, nonce || preamble || header)[0..16), where the preamble is the
// frame's first 32 bytes (kind, request id, lengths) and key = JobSecret::Derive("frames").
// A frame from a process without the job's secret, or replayed from another connection, fails
// the check before its payload is read. The payload itself is not covered: only TLS protects it
// from a peer that can change bytes on the wire (docs/security.md).
// FrameMac has one owner (a connection); NewNonce is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "security/hmac.h"

namespace tessera::security {

constexpr size_t kNonceBytes = 16;
constexpr size_t kFrameTagBytes = 16;
using Nonce = std::array<uint8_t, kNonceBytes>;

Nonce NewNonce();

class FrameMac {
 public:
  FrameMac(const Key& frames_key, const Nonce& nonce) : hmac_(frames_key), nonce_(nonce) {}

  void Tag(const uint8_t* preamble, size_t preamble_len, std::string_view header,
           uint8_t out[kFrameTagBytes]);
  // Compares in constant time.
  bool Check(const uint8_t* preamble, size_t preamble_len, std::string_view header,
             const uint8_t tag[kFrameTagBytes]);

 private:
  Hmac hmac_;
  Nonce nonce_;
};

}  // namespace tessera::security
