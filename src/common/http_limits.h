// The limits every HTTP server of Tessera (the master's console and API, a pserver's /metrics)
// puts on requests: none of them takes a body of any size, so a request declaring a larger one is
// answered 413 at once, before a byte of its body is read, and its connection closed. (Without
// this, a request declaring a 2^40-byte body held tens of MB of the server's memory each.)
// Then the access rule (http_access.h): a request without the token an endpoint bound off
// loopback needs is answered 401. Header-only (for the libraries that already use cpp-httplib);
// thread-safe once installed.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/http_access.h"

namespace tessera {

constexpr size_t kMaxHttpRequestBody = size_t{1} << 20;  // 1 MiB

// Runs a bound server's loop on a new thread and returns once the loop runs, so that a stop()
// right after (a node failing at start-up) is not lost, which would leave join() waiting forever.
inline std::thread ServeInBackground(httplib::Server& server) {
  std::thread t([&server] { server.listen_after_bind(); });
  for (int i = 0; i < 1000 && !server.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return t;
}

// Answers a request `access` refuses (401), or sets the token cookie it asks for. True if handled.
inline bool RefuseWithoutToken(const HttpAccess& access, const httplib::Request& req,
                               httplib::Response& res) {
  const std::string query_token = req.has_param("token") ? req.get_param_value("token") : "";
  switch (access.Decide(req.path, req.get_header_value("Authorization"), req.get_header_value("Cookie"),
                        query_token)) {
    case HttpAccess::Verdict::kAllow:
      return false;
    case HttpAccess::Verdict::kAllowAndSetCookie:
      res.set_header("Set-Cookie", std::string(HttpAccess::kCookie) + "=" + access.token() +
                                       "; Path=/; HttpOnly; SameSite=Strict");
      return false;
    case HttpAccess::Verdict::kDeny:
      break;
  }
  res.status = 401;
  res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(HttpAccess::kDenied, "text/plain");
  return true;
}

// Requests whose path `large` accepts (when given) may carry up to `large_max` bytes. `access`
// (when given) is checked on every request. With `json_errors`, a refusal is the JSON error every
// other answer of that API gives ({"error": {"code": "too_large", "message": ...}}), else text.
inline void LimitHttpRequests(httplib::Server& server, size_t max_body = kMaxHttpRequestBody,
                              std::function<bool(const std::string& path)> large = nullptr,
                              size_t large_max = 0, std::shared_ptr<const HttpAccess> access = nullptr,
                              bool json_errors = false) {
  server.set_payload_max_length(std::max(max_body, large_max));
  server.set_pre_routing_handler([=](const httplib::Request& req, httplib::Response& res) {
    if (access && RefuseWithoutToken(*access, req, res)) return httplib::Server::HandlerResponse::Handled;
    const std::string declared = req.get_header_value("Content-Length");
    if (declared.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const size_t limit = large && large(req.path) ? large_max : max_body;
    char* end = nullptr;
    unsigned long long n = std::strtoull(declared.c_str(), &end, 10);
    if (end && *end == '\0' && n <= limit) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 413;
    res.set_header("Connection", "close");
    std::string message =
        "request body of " + declared + " bytes refused: at most " + std::to_string(limit) + " bytes";
    if (json_errors) {
      // The declared length is digits or was refused as not a number: no quoting needed but this.
      for (char& c : message)
        if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '?';
      res.set_content("{\"error\":{\"code\":\"too_large\",\"message\":\"" + message + "\"}}",
                      "application/json");
    } else {
      res.set_content(message + "\n", "text/plain");
    }
    return httplib::Server::HandlerResponse::Handled;
  });
}

}  // namespace tessera
