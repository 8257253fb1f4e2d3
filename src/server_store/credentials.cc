// Password hashing and tokens (see credentials.h).
#include "server_store/credentials.h"

#include <sodium.h>

#include <cstdio>

#include "common/digest.h"

namespace tessera::server {
namespace {

bool SodiumReady() {
  static const bool ready = sodium_init() >= 0;
  return ready;
}

}  // namespace

Status CheckPasswordPolicy(const std::string& password) {
  if (password.size() < 8) return Status::InvalidArgument("a password has at least 8 characters");
  if (password.size() > 1024) return Status::InvalidArgument("a password has at most 1024 bytes");
  return Status::OK();
}

StatusOr<std::string> HashPassword(const std::string& password) {
  TESSERA_RETURN_IF_ERROR(CheckPasswordPolicy(password));
  if (!SodiumReady()) return Status::Internal("libsodium did not initialize");
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str(out, password.data(), password.size(), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                        crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
    return Status::ResourceExhausted("not enough memory to hash a password");
  }
  return std::string(out);
}

bool VerifyPassword(const std::string& hash, const std::string& password) {
  if (!SodiumReady() || hash.empty() || hash.size() >= crypto_pwhash_STRBYTES) return false;
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

std::string NewToken() {
  SodiumReady();
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  std::string token = "tsk_";
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    token += hex;
  }
  return token;
}

std::string TokenDigest(const std::string& token) { return Sha256Hex(token); }

}  // namespace tessera::server
