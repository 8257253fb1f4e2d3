// Authentication of a job's gRPC calls (master task calls, the gRPC data plane): the caller sends
// the metadata entry "tessera-auth: <unix ms>.<32 hex>" where the hex is the first 16 bytes of
// HMAC-SHA256(JobSecret::Derive("rpc"), method "\n" ms "\n" body) and body is the serialized
// request. The receiver accepts it within kWindow of its own clock. Without TLS, a token seen on
// the wire can be replayed for the same request within the window; TLS closes that
// (docs/security.md). Pure: the clock is an argument. Thread-safe (const).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "security/job_secret.h"
#include "tessera/status.h"

namespace tessera::security {

inline constexpr char kRpcAuthMetadata[] = "tessera-auth";

class RpcAuth {
 public:
  static constexpr int64_t kWindowMs = 5 * 60 * 1000;

  explicit RpcAuth(const JobSecret& secret) : key_(secret.Derive("rpc")) {}

  std::string Token(std::string_view method, std::string_view body, int64_t now_ms) const;
  // OK, or Unauthenticated saying why (missing, malformed, outside the window, wrong secret)
  // without echoing the token.
  Status Check(std::string_view token, std::string_view method, std::string_view body, int64_t now_ms) const;

 private:
  std::string Mac(std::string_view method, int64_t ms, std::string_view body) const;
  Key key_;
};

}  // namespace tessera::security
