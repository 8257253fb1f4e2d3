// A job's secret: 32 random bytes made when the job is created, known only to the job's own
// processes. Every data-plane frame and every master RPC of the job carries a MAC keyed by a key
// derived from it, so a process without it (or with another job's) is refused. Stored as 64 hex
// characters (in etcd under the job's prefix, or in a file given with --secret-file).
// Immutable value; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera::security {

using Key = std::array<uint8_t, 32>;

class JobSecret {
 public:
  static constexpr size_t kBytes = 32;

  JobSecret() = default;  // empty: the job authenticates nothing
  // 32 bytes from the OS's random source (OpenSSL RAND_bytes). Aborts if it has none.
  static JobSecret Generate();
  // From its text form (64 hex characters, surrounding white space ignored). InvalidArgument
  // saying what is wrong, never echoing the text.
  static StatusOr<JobSecret> FromText(std::string_view text);
  // Reads a secret file. PermissionDenied if others than its owner may read it (mode & 077);
  // InvalidArgument (naming the file) if it does not hold a secret.
  static StatusOr<JobSecret> FromFile(const std::string& path);

  bool empty() const { return !set_; }
  std::string Text() const;  // 64 hex characters
  // A short public name of the secret (8 hex characters of a one-way function of it), for log
  // lines and `tessera job show`: two processes can tell they hold the same secret.
  std::string Fingerprint() const;
  // The token a node's HTTP endpoints ask for when bound off loopback (common/http_access.h):
  // 32 hex characters derived from the secret, so whoever holds the secret can make it.
  std::string ConsoleToken() const;
  // A key for one purpose ("frames", "rpc"): HMAC-SHA256(secret, purpose), so the uses never
  // share a key.
  Key Derive(std::string_view purpose) const;

  friend bool operator==(const JobSecret& a, const JobSecret& b);

 private:
  std::array<uint8_t, kBytes> bytes_{};
  bool set_ = false;
};

// Writes `secret` to `path` with mode 0600, atomically (a temp file renamed over it).
Status WriteSecretFile(const std::string& path, const JobSecret& secret);

}  // namespace tessera::security
