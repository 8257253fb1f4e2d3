// HMAC-SHA256 (OpenSSL EVP_MAC) with a context kept between messages: Begin, Update..., Finish,
// and again, without allocating per message. One owner (not thread-safe); make one per
// connection or thread. ConstantTimeEqual compares tags without leaking where they differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "security/job_secret.h"

namespace tessera::security {

class Hmac {
 public:
  explicit Hmac(const Key& key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;

  void Begin();
  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  void Finish(uint8_t out[32]);

 private:
  struct Impl;
  Impl* impl_;
};

// HMAC-SHA256 of `data` under `key`, in one call.
Key HmacOnce(const Key& key, std::string_view data);

bool ConstantTimeEqual(const void* a, const void* b, size_t n);

}  // namespace tessera::security
