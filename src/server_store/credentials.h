// Credentials: password hashes (Argon2id, libsodium's crypto_pwhash_str, with its interactive
// limits and a random salt in the hash string) and bearer tokens (256 random bits, shown to
// the user once and stored only as their SHA-256). Thread-safe.
#pragma once

#include <string>

#include "tessera/status.h"

namespace tessera::server {

// InvalidArgument when the password is too short (< 8) or too long (> 1024 bytes).
Status CheckPasswordPolicy(const std::string& password);
StatusOr<std::string> HashPassword(const std::string& password);
bool VerifyPassword(const std::string& hash, const std::string& password);

// "tsk_" + 64 hex characters.
std::string NewToken();
// What is stored for a token (its SHA-256, hex); a token not of our form hashes all the same.
std::string TokenDigest(const std::string& token);

}  // namespace tessera::server
