// The REST API's client (see api_client.h).
#include "remote/api_client.h"

#include <httplib.h>

#include <chrono>
#include <thread>

namespace tessera::remote {
namespace {

StatusCode CodeOfName(const std::string& name, int http_status) {
  if (name == "invalid_argument") return StatusCode::kInvalidArgument;
  if (name == "unauthenticated") return StatusCode::kUnauthenticated;
  if (name == "permission_denied") return StatusCode::kPermissionDenied;
  if (name == "not_found") return StatusCode::kNotFound;
  if (name == "already_exists") return StatusCode::kAlreadyExists;
  if (name == "failed_precondition") return StatusCode::kFailedPrecondition;
  if (name == "resource_exhausted") return StatusCode::kResourceExhausted;
  if (name == "unavailable") return StatusCode::kUnavailable;
  if (name == "data_loss") return StatusCode::kDataLoss;
  switch (http_status) {
    case 400:
    case 413:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kFailedPrecondition;
    case 429:
      return StatusCode::kResourceExhausted;
    case 502:
    case 503:
    case 504:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

Status StatusOfAnswer(int http_status, const std::string& body) {
  if (http_status >= 200 && http_status < 300) return Status::OK();
  auto j = Json::parse(body, nullptr, false);
  std::string code, message;
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    code = j["error"].value("code", "");
    message = j["error"].value("message", "");
  }
  if (message.empty()) {
    // Not one of the API's answers (a proxy's page, httplib's own 413): its first line.
    message = body.substr(0, std::min<size_t>(body.find('\n'), 200));
    if (message.empty()) message = "the server answered HTTP " + std::to_string(http_status);
  }
  return Status(CodeOfName(code, http_status), message);
}

ApiClient::ApiClient(ClientOptions options) : o_(std::move(options)) { http_ = NewClient(o_.timeout_s); }

ApiClient::~ApiClient() = default;

std::unique_ptr<httplib::Client> ApiClient::NewClient(double read_timeout_s) const {
  auto c = std::make_unique<httplib::Client>(o_.server);
  c->set_connection_timeout(std::chrono::seconds(5));
  c->set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(read_timeout_s * 1000)));
  c->set_write_timeout(std::chrono::milliseconds(static_cast<int64_t>(read_timeout_s * 1000)));
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  if (!o_.ca_file.empty()) c->set_ca_cert_path(o_.ca_file.c_str());
  if (!o_.token.empty()) c->set_bearer_token_auth(o_.token.c_str());
  return c;
}

StatusOr<Json> ApiClient::Get(const std::string& path) { return Send("GET", path, "", "", {}); }

StatusOr<Json> ApiClient::Post(const std::string& path, const Json& body) {
  if (body.is_null()) return Send("POST", path, "", "", {});
  return Send("POST", path, body.dump(), "application/json", {});
}

StatusOr<Json> ApiClient::Put(const std::string& path, const Json& body) {
  if (body.is_null()) return Send("PUT", path, "", "", {});
  return Send("PUT", path, body.dump(), "application/json", {});
}

StatusOr<Json> ApiClient::Delete(const std::string& path) { return Send("DELETE", path, "", "", {}); }

StatusOr<Json> ApiClient::PutBytes(const std::string& path, std::string_view bytes,
                                   const std::map<std::string, std::string>& headers) {
  return Send("PUT", path, bytes, "application/octet-stream", headers);
}

StatusOr<Json> ApiClient::Send(const std::string& method, const std::string& path, std::string_view body,
                               const std::string& content_type,
                               const std::map<std::string, std::string>& headers) {
  httplib::Headers h(headers.begin(), headers.end());
  httplib::Result res{nullptr, httplib::Error::Unknown};
  if (method == "GET") {
    res = http_->Get(path, h);
  } else if (method == "POST") {
    res = http_->Post(path, h, body.data(), body.size(), content_type);
  } else if (method == "PUT") {
    res = http_->Put(path, h, body.data(), body.size(), content_type);
  } else {
    res = http_->Delete(path, h);
  }
  if (!res) {
    std::string why = httplib::to_string(res.error());
    if (res.error() == httplib::Error::Connection) why = "connection refused or no route";
    if (res.error() == httplib::Error::SSLServerVerification)
      why = "its certificate is not trusted (give the CA with --ca-cert)";
    return Status::Unavailable("cannot reach the tessera server at " + o_.server + " (" + why + ")");
  }
  TESSERA_RETURN_IF_ERROR(StatusOfAnswer(res->status, res->body));
  if (res->body.empty()) return Json::object();
  auto j = Json::parse(res->body, nullptr, false);
  if (j.is_discarded())
    return Status::Internal("the server at " + o_.server + " answered " + method + " " + path +
                            " with something that is not JSON; is it a tessera server?");
  return j;
}

Status ApiClient::Follow(const std::string& path, const std::function<bool(const SseEvent&)>& on_event,
                         int max_reconnects) {
  SseParser parser;
  int failures = 0;
  // The server sends a comment every ~10 s while a log is quiet, so a read that waits 45 s
  // means the connection is gone.
  auto http = NewClient(45);
  for (;;) {
    if (cancelled_) return Status::Cancelled("stopped following");
    bool ended = false, stopped = false;
    int status = 0;
    std::string error_body;
    httplib::Headers h;
    parser.Reset();
    if (!parser.last_id().empty()) h.emplace("Last-Event-ID", parser.last_id());
    auto res = http->Get(
        path, h,
        [&](const httplib::Response& r) {
          status = r.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (cancelled_) return false;
          if (status != 200) {
            if (error_body.size() < 4096) error_body.append(data, n);
            return true;
          }
          failures = 0;
          for (const auto& e : parser.Feed(std::string_view(data, n))) {
            if (e.event == "end") {
              ended = true;
              return false;
            }
            if (!on_event(e)) {
              stopped = true;
              return false;
            }
          }
          return true;
        });
    if (ended || stopped) return Status::OK();
    if (cancelled_) return Status::Cancelled("stopped following");
    if (status != 0 && status != 200) return StatusOfAnswer(status, error_body);
    // The stream ended without `end` (the server's one-hour limit, a restart) or failed.
    if (++failures > max_reconnects) {
      return Status::Unavailable(
          "lost the connection to " + o_.server + " " + std::to_string(failures) + " times in a row (" +
          (res ? std::string("stream closed") : httplib::to_string(res.error())) + ")");
    }
    for (int i = 0; i < 10 * std::min(failures, 5) && !cancelled_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace tessera::remote
