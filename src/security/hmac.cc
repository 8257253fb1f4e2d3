// Hmac (see hmac.h).
#include "security/hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdio>
#include <cstdlib>

namespace tessera::security {

struct Hmac::Impl {
  EVP_MAC* mac = nullptr;  // shared, never freed
  EVP_MAC_CTX* ctx = nullptr;
  Key key;
};

namespace {
[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "tessera: OpenSSL HMAC-SHA256 failed in %s\n", what);
  std::abort();
}
}  // namespace

namespace {
// Fetched once: the provider lookup costs tens of microseconds, more than the MAC itself.
EVP_MAC* FetchHmac() {
  static EVP_MAC* mac = [] {
    EVP_MAC* m = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (!m) Die("EVP_MAC_fetch");
    return m;
  }();
  return mac;
}
}  // namespace

Hmac::Hmac(const Key& key) : impl_(new Impl) {
  impl_->key = key;
  impl_->mac = FetchHmac();
  impl_->ctx = EVP_MAC_CTX_new(impl_->mac);
  if (!impl_->ctx) Die("EVP_MAC_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(impl_->ctx, impl_->key.data(), impl_->key.size(), params) != 1) Die("EVP_MAC_init");
}

Hmac::~Hmac() {
  EVP_MAC_CTX_free(impl_->ctx);
  OPENSSL_cleanse(impl_->key.data(), impl_->key.size());
  delete impl_;
}

void Hmac::Begin() {
  // A null key restarts with the key already set (no allocation).
  if (EVP_MAC_init(impl_->ctx, nullptr, 0, nullptr) != 1) Die("EVP_MAC_init");
}

void Hmac::Update(const void* data, size_t n) {
  if (n && EVP_MAC_update(impl_->ctx, static_cast<const unsigned char*>(data), n) != 1) Die("EVP_MAC_update");
}

void Hmac::Finish(uint8_t out[32]) {
  size_t len = 0;
  if (EVP_MAC_final(impl_->ctx, out, &len, 32) != 1 || len != 32) Die("EVP_MAC_final");
}

Key HmacOnce(const Key& key, std::string_view data) {
  Hmac h(key);
  h.Begin();
  h.Update(data);
  Key out;
  h.Finish(out.data());
  return out;
}

bool ConstantTimeEqual(const void* a, const void* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

}  // namespace tessera::security
