// The data plane's OpenSSL context (see ssl_context.h).
#include "security/ssl_context.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tessera::security {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio MemBio(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

Status Fail(const std::string& what) { return Status::InvalidArgument(what + ": " + SslErrors("no detail")); }

// Seconds to encrypt 1 MiB with `cipher` (in 64 KiB calls, as records are sealed), best of 3.
double SealSeconds(const EVP_CIPHER* cipher) {
  std::vector<unsigned char> in(64 * 1024, 7), out(in.size() + 64);
  unsigned char key[32] = {1}, iv[12] = {2};
  double best = 1e9;
  for (int round = 0; round < 3; ++round) {
    EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
    if (!c || EVP_EncryptInit_ex(c, cipher, nullptr, key, iv) != 1) {
      EVP_CIPHER_CTX_free(c);
      return 1e9;
    }
    const auto start = std::chrono::steady_clock::now();
    int len = 0;
    for (int i = 0; i < 16; ++i)
      EVP_EncryptUpdate(c, out.data(), &len, in.data(), static_cast<int>(in.size()));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EVP_CIPHER_CTX_free(c);
  }
  return best;
}

// The TLS 1.3 suites, the one this machine seals fastest first (measured once per process):
// AES-GCM where AES-NI is the fastest path, ChaCha20-Poly1305 where AVX-512 makes it faster (by
// half again on the machine the benchmarks ran on). The client's order decides.
const std::string& SuitesFastestFirst() {
  static const std::string suites = [] {
    const bool chacha = SealSeconds(EVP_chacha20_poly1305()) < SealSeconds(EVP_aes_128_gcm());
    return chacha ? std::string("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384")
                  : std::string("TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
  }();
  return suites;
}

}  // namespace

std::string SslErrors(const std::string& fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? fallback : out;
}

StatusOr<SslContext> MakeSslContext(const TlsConfig& tls, TlsSide side) {
  ERR_clear_error();
  SslContext ctx(SSL_CTX_new(side == TlsSide::kServer ? TLS_server_method() : TLS_client_method()));
  if (!ctx) return Fail("cannot make a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  if (SSL_CTX_set_ciphersuites(ctx.get(), SuitesFastestFirst().c_str()) != 1)
    return Fail("cannot set the TLS cipher suites");
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  // A peer that closes without a TLS close_notify has closed the connection, nothing worse: the
  // frames carry their own lengths, so a cut message is still seen as cut.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  // Non-blocking sockets: a write may finish part of its buffer, and be retried from where it
  // stopped with the pointer moved on.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Reads take whatever the socket has, up to a record's worth (a larger buffer costs more in
  // OpenSSL's moving of partial records to its front than it saves in system calls).
  SSL_CTX_set_read_ahead(ctx.get(), 1);

  // This node's certificate and key.
  Bio cert_bio = MemBio(tls.cert_pem);
  X509* cert = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (!cert) return Fail("cannot read this node's TLS certificate");
  int ok = SSL_CTX_use_certificate(ctx.get(), cert);
  X509_free(cert);
  if (ok != 1) return Fail("cannot use this node's TLS certificate");
  Bio key_bio = MemBio(tls.key_pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (!key) return Fail("cannot read this node's TLS key");
  ok = SSL_CTX_use_PrivateKey(ctx.get(), key);
  EVP_PKEY_free(key);
  if (ok != 1 || SSL_CTX_check_private_key(ctx.get()) != 1)
    return Fail("the TLS key does not fit its certificate");

  // Trust the job's CA only, and only certificates that name the job.
  X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
  Bio ca_bio = MemBio(tls.ca_pem);
  int cas = 0;
  while (X509* ca = PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr)) {
    ok = X509_STORE_add_cert(store, ca);
    X509_free(ca);
    if (ok != 1) return Fail("cannot trust the job's CA");
    ++cas;
  }
  ERR_clear_error();  // the end of the PEM stream
  if (cas == 0) return Status::InvalidArgument("the job's CA file holds no certificate");
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (X509_VERIFY_PARAM_set1_host(param, tls.PeerName().c_str(), 0) != 1)
    return Fail("cannot require the job's name of peers");
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return ctx;
}

}  // namespace tessera::security
