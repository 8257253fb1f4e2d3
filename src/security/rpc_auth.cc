// RpcAuth (see rpc_auth.h).
#include "security/rpc_auth.h"

#include <cstdlib>

#include "common/strings.h"
#include "security/hmac.h"

namespace tessera::security {

std::string RpcAuth::Mac(std::string_view method, int64_t ms, std::string_view body) const {
  Hmac h(key_);
  h.Begin();
  h.Update(method);
  h.Update("\n");
  h.Update(std::to_string(ms));
  h.Update("\n");
  h.Update(body);
  uint8_t out[32];
  h.Finish(out);
  return HexEncode(out, 16);
}

std::string RpcAuth::Token(std::string_view method, std::string_view body, int64_t now_ms) const {
  return std::to_string(now_ms) + "." + Mac(method, now_ms, body);
}

Status RpcAuth::Check(std::string_view token, std::string_view method, std::string_view body,
                      int64_t now_ms) const {
  if (token.empty())
    return Status::Unauthenticated("the call carries no job credentials (the caller has no job secret)");
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 19 || token.size() - dot - 1 != 32 ||
      token.substr(0, dot).find_first_not_of("0123456789") != std::string_view::npos) {
    return Status::Unauthenticated("the call's job credentials are malformed");
  }
  const int64_t ms = std::strtoll(std::string(token.substr(0, dot)).c_str(), nullptr, 10);
  if (ms < now_ms - kWindowMs || ms > now_ms + kWindowMs) {
    return Status::Unauthenticated("the call's job credentials are from " +
                                   std::to_string((now_ms - ms) / 1000) +
                                   " s ago (more than 300 s apart: are the clocks of the two machines set?)");
  }
  const std::string want = Mac(method, ms, body);
  if (!ConstantTimeEqual(want.data(), token.data() + dot + 1, 32)) {
    return Status::Unauthenticated("the call's job credentials do not match this job's secret");
  }
  return Status::OK();
}

}  // namespace tessera::security
