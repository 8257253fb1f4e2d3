// An OpenSSL context for a job's mutual TLS on the TCP data plane (tls_stream.h drives it): TLS
// 1.3 only, the AEAD this machine seals fastest first (AES-GCM or ChaCha20-Poly1305), this node's certificate
// and key, and a peer required on both ends whose certificate chains to the job's CA and names the job (DNS
// tessera.<job>). No session tickets (connections are long-lived and never resumed). Built once per server or
// connection from a loaded TlsConfig; immutable afterwards, so one context may serve many connections at
// once.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "security/tls_config.h"
#include "tessera/status.h"

namespace tessera::security {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslContext = std::unique_ptr<SSL_CTX, SslCtxFree>;

enum class TlsSide { kClient, kServer };

// InvalidArgument if the PEM material does not load (TlsConfig::Load has checked it already).
StatusOr<SslContext> MakeSslContext(const TlsConfig& tls, TlsSide side);

// OpenSSL's queued errors as one line ("error:0A000086:SSL routines::certificate verify
// failed"), emptying the queue; `fallback` if there are none.
std::string SslErrors(const std::string& fallback);

}  // namespace tessera::security
