// The limits every HTTP server of Tessera (the master's console and API, a pserver's /metrics)
// puts on requests: none of them takes a body of any size, so a request declaring a larger one is
// answered 413 at once, before a byte of its body is read, and its connection closed. (Without
// this, a request declaring a 2^40-byte body held tens of MB of the server's memory each.)
// Header-only (for the libraries that already use cpp-httplib); thread-safe once installed.
#pragma once

#include <httplib.h>

#include <cstdlib>
#include <string>

namespace tessera {

constexpr size_t kMaxHttpRequestBody = size_t{1} << 20;  // 1 MiB

inline void LimitHttpRequests(httplib::Server& server, size_t max_body = kMaxHttpRequestBody) {
  server.set_payload_max_length(max_body);
  server.set_pre_routing_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    const std::string declared = req.get_header_value("Content-Length");
    if (declared.empty()) return httplib::Server::HandlerResponse::Unhandled;
    char* end = nullptr;
    unsigned long long n = std::strtoull(declared.c_str(), &end, 10);
    if (end && *end == '\0' && n <= max_body) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 413;
    res.set_header("Connection", "close");
    res.set_content("request body of " + declared + " bytes refused: at most " + std::to_string(max_body) +
                        " bytes\n",
                    "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
}

}  // namespace tessera
