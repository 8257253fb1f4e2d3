// Who may use a node's HTTP endpoints (the master's console and API, a pserver's /metrics). Bound
// to a loopback address (the default) they answer the processes of this host; bound anywhere else
// every request needs the job's console token (security::JobSecret::ConsoleToken), except the
// probes /healthz and /readyz, which say nothing about the job. The token is taken from an
// "Authorization: Bearer" header (Prometheus, curl), a "tessera_token" cookie, or a "token" query
// parameter (a link to the console), which is then also set as the cookie so the page's own
// requests carry it. Pure policy; thread-safe (const).
#pragma once

#include <string>
#include <string_view>

#include "common/addressing.h"  // IsLoopbackHost: whether a bind needs the token

namespace tessera {

class HttpAccess {
 public:
  // `token` empty: everything is allowed (a loopback bind).
  explicit HttpAccess(std::string token) : token_(std::move(token)) {}

  enum class Verdict {
    kAllow,
    kAllowAndSetCookie,  // the token came in the query: set it as the cookie
    kDeny,
  };
  Verdict Decide(std::string_view path, std::string_view authorization, std::string_view cookies,
                 std::string_view query_token) const;
  bool open() const { return token_.empty(); }
  const std::string& token() const { return token_; }

  static constexpr char kCookie[] = "tessera_token";
  // What a denied request is told.
  static constexpr char kDenied[] =
      "this endpoint needs the job's console token (bound to a non-loopback address): send \"Authorization: "
      "Bearer TOKEN\" or open the URL `tessera status` prints\n";

 private:
  bool Matches(std::string_view given) const;
  std::string token_;
};

}  // namespace tessera
