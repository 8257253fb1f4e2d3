// The shared machinery of the REST API's routes (see api_routes.h).
#include "server/api_routes.h"

#include "common/clock.h"

namespace tessera::server {

std::string ErrorCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kOutOfRange:
      return "invalid_argument";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kPermissionDenied:
      return "permission_denied";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kAlreadyExists:
      return "already_exists";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kDataLoss:
      return "data_loss";
    default:
      return "internal";
  }
}

int HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kDataLoss:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void ApiRoutes::Send(httplib::Response& res, const StatusOr<Reply>& r) {
  if (!r.ok()) {
    res.status = HttpStatusOf(r.status());
    nlohmann::json err = {{"code", ErrorCodeName(r.status().code())}, {"message", r.status().message()}};
    res.set_content(
        nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        "application/json");
    return;
  }
  res.status = r->status;
  if (r->status == 204) return;
  if (!r->content_type.empty()) {
    res.set_content(r->raw, r->content_type);
  } else {
    res.set_content(r->body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
  }
}

StatusOr<User> ApiRoutes::Caller(const httplib::Request& req) const {
  const std::string h = req.get_header_value("Authorization");
  if (h.rfind("Bearer ", 0) != 0) return Status::Unauthenticated("no 'Authorization: Bearer <token>' header");
  return accounts_->Authenticate(h.substr(7), WallMillis());
}

Status ApiRoutes::Need(const User& u, const std::string& ns, Action a) const {
  TESSERA_ASSIGN_OR_RETURN(auto role, accounts_->RoleIn(u.id, ns));
  if (Allowed(role, u.admin, a)) return Status::OK();
  if (!role && !u.admin) return Status::NotFound("no namespace '" + ns + "' of yours");
  return Status::PermissionDenied(std::string("your role in '") + ns + "' may not " + ActionName(a));
}

httplib::Server::Handler ApiRoutes::Wrap(const std::string& action, Handler fn) {
  return [this, action, fn](const httplib::Request& req, httplib::Response& res) {
    auto who = Caller(req);
    if (!who.ok()) {
      (void)accounts_->Audit("", action, req.path, "unauthenticated", who.status().message(), WallMillis());
      return Send(res, who.status());
    }
    StatusOr<Reply> r = fn(*who, req);
    // Every change is audited, and every refusal; successful reads are not (they would be most
    // of the log, and a write each).
    if (req.method != "GET" || !r.ok())
      (void)accounts_->Audit(who->id, action, req.path, r.ok() ? "ok" : ErrorCodeName(r.status().code()),
                             r.ok() ? "" : r.status().message(), WallMillis());
    Send(res, r);
  };
}

void ApiRoutes::Get(const std::string& p, const std::string& a, Handler h) {
  Note("GET", p);
  http_->Get(p, Wrap(a, std::move(h)));
}
void ApiRoutes::Post(const std::string& p, const std::string& a, Handler h) {
  Note("POST", p);
  http_->Post(p, Wrap(a, std::move(h)));
}
void ApiRoutes::Put(const std::string& p, const std::string& a, Handler h) {
  Note("PUT", p);
  http_->Put(p, Wrap(a, std::move(h)));
}
void ApiRoutes::Delete(const std::string& p, const std::string& a, Handler h) {
  Note("DELETE", p);
  http_->Delete(p, Wrap(a, std::move(h)));
}

}  // namespace tessera::server
