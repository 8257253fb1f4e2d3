// HttpAccess (see http_access.h).
#include "common/http_access.h"

#include <openssl/crypto.h>

namespace tessera {

bool HttpAccess::Matches(std::string_view given) const {
  return given.size() == token_.size() && CRYPTO_memcmp(given.data(), token_.data(), token_.size()) == 0;
}

HttpAccess::Verdict HttpAccess::Decide(std::string_view path, std::string_view authorization,
                                       std::string_view cookies, std::string_view query_token) const {
  if (open() || path == "/healthz" || path == "/readyz") return Verdict::kAllow;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) == kBearer && Matches(authorization.substr(kBearer.size()))) {
    return Verdict::kAllow;
  }
  // Cookie: "a=1; tessera_token=...; b=2"
  const std::string want = std::string(kCookie) + "=";
  for (size_t at = 0; at < cookies.size();) {
    size_t end = cookies.find(';', at);
    if (end == std::string_view::npos) end = cookies.size();
    std::string_view part = cookies.substr(at, end - at);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    if (part.substr(0, want.size()) == want && Matches(part.substr(want.size()))) return Verdict::kAllow;
    at = end + 1;
  }
  if (!query_token.empty() && Matches(query_token)) return Verdict::kAllowAndSetCookie;
  return Verdict::kDeny;
}

}  // namespace tessera
