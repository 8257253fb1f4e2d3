// SHA-256 digests (OpenSSL EVP) for checkpoint files and data set manifests.
// Sha256 is a single-owner object (not thread-safe); the free functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // Finishes the digest and returns it as 64 lowercase hex characters. The object may not be
  // updated afterwards.
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// SHA-256 of a string, as hex.
std::string Sha256Hex(std::string_view data);

// SHA-256 of a whole file, read in streaming fashion, as hex.
StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace tessera
