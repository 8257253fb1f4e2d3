// JobSecret (see job_secret.h).
#include "security/job_secret.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "common/strings.h"
#include "security/hmac.h"

namespace tessera::security {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

JobSecret JobSecret::Generate() {
  JobSecret s;
  if (RAND_bytes(s.bytes_.data(), static_cast<int>(s.bytes_.size())) != 1) {
    std::fprintf(stderr, "tessera: the random source failed (RAND_bytes); cannot make a job secret\n");
    std::abort();
  }
  s.set_ = true;
  return s;
}

StatusOr<JobSecret> JobSecret::FromText(std::string_view text) {
  text = Trim(text);
  if (text.size() != 2 * kBytes) {
    return Status::InvalidArgument("a job secret is " + std::to_string(2 * kBytes) + " hex characters, not " +
                                   std::to_string(text.size()));
  }
  JobSecret s;
  for (size_t i = 0; i < kBytes; ++i) {
    int hi = HexValue(text[2 * i]), lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::InvalidArgument("a job secret holds hex digits only");
    s.bytes_[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  s.set_ = true;
  return s;
}

StatusOr<JobSecret> JobSecret::FromFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound("cannot read the job secret file " + path + ": " + std::strerror(errno));
  }
  if (OthersMayRead(st)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::PermissionDenied("the job secret file " + path + " has mode " + mode +
                                    ": others may read it (chmod 600 " + path + ")");
  }
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto s = FromText(text);
  if (!s.ok()) return s.status().WithContext("job secret file " + path);
  return s;
}

std::string JobSecret::Text() const { return set_ ? HexEncode(bytes_.data(), bytes_.size()) : ""; }

std::string JobSecret::Fingerprint() const {
  if (!set_) return "";
  Key k = Derive("fingerprint");
  return HexEncode(k.data(), 4);
}

std::string JobSecret::ConsoleToken() const {
  if (!set_) return "";
  Key k = Derive("console");
  return HexEncode(k.data(), 16);
}

Key JobSecret::Derive(std::string_view purpose) const {
  Key key;
  std::memcpy(key.data(), bytes_.data(), key.size());
  Key out = HmacOnce(key, std::string("tessera job secret v1: ") + std::string(purpose));
  OPENSSL_cleanse(key.data(), key.size());
  return out;
}

bool operator==(const JobSecret& a, const JobSecret& b) {
  return a.set_ == b.set_ && ConstantTimeEqual(a.bytes_.data(), b.bytes_.data(), a.bytes_.size());
}

Status WriteSecretFile(const std::string& path, const JobSecret& secret) {
  return WriteFileAtomic(path, secret.Text() + "\n", 0600);
}

}  // namespace tessera::security
