// ApiClient: calls a tessera server's REST API (docs/platform-api.md) for the command line.
// JSON in and out; an error answer becomes a Status with the server's code and message, a
// connection that fails one saying which server could not be reached and why. Follow() reads a
// server-sent event stream (a followed log), reconnecting from the last event after a dropped
// connection. One owner (not thread-safe), except that Cancel() may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "remote/sse.h"
#include "tessera/status.h"

namespace httplib {
class Client;
}

namespace tessera::remote {

using Json = nlohmann::json;

struct ClientOptions {
  std::string server;   // "http://host:port" or "https://host:port" (see NormalizeServer)
  std::string token;    // bearer token; empty for signup and login
  std::string ca_file;  // https: the CA that signed the server's certificate (default: the system's)
  double timeout_s = 60;
};

class ApiClient {
 public:
  explicit ApiClient(ClientOptions options);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // `path` starts with /api/v1. A 204 answer is an empty object.
  StatusOr<Json> Get(const std::string& path);
  // A null `body` (the default) sends none: the endpoints that take none are described so.
  StatusOr<Json> Post(const std::string& path, const Json& body = Json());
  StatusOr<Json> Put(const std::string& path, const Json& body = Json());
  StatusOr<Json> Delete(const std::string& path);
  // Raw bytes (a data chunk, a code package) with extra headers.
  StatusOr<Json> PutBytes(const std::string& path, std::string_view bytes,
                          const std::map<std::string, std::string>& headers = {});

  // Reads the event stream at `path`, calling `on_event` for each event until the server sends
  // `event: end` (then OK), `on_event` returns false (OK), Cancel() is called (Cancelled), or
  // the connection fails `max_reconnects` times in a row (Unavailable). After a dropped
  // connection it reconnects with Last-Event-ID, so no line is lost or repeated.
  Status Follow(const std::string& path, const std::function<bool(const SseEvent&)>& on_event,
                int max_reconnects = 10);
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_.load(); }

  const std::string& server() const { return o_.server; }

 private:
  StatusOr<Json> Send(const std::string& method, const std::string& path, std::string_view body,
                      const std::string& content_type, const std::map<std::string, std::string>& headers);
  std::unique_ptr<httplib::Client> NewClient(double read_timeout_s) const;

  ClientOptions o_;
  std::unique_ptr<httplib::Client> http_;
  std::atomic<bool> cancelled_{false};
};

// The Status an HTTP answer stands for: its JSON error's message, and a code from the status
// (400 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied, 404 NotFound, 409
// AlreadyExists or FailedPrecondition, 413 InvalidArgument, 429 ResourceExhausted, 5xx
// Unavailable or Internal). Pure.
Status StatusOfAnswer(int http_status, const std::string& body);

}  // namespace tessera::remote
