// The platform's REST API: accounts (see api_server.h).
#include "server/api_server.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/http_limits.h"
#include "server/json_body.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

std::string CodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    default: return "internal";
  }
}

// A reply: a JSON value and its HTTP status.
struct Reply {
  int status = 200;
  Json body = Json::object();
};

void Send(httplib::Response& res, const StatusOr<Reply>& r) {
  if (!r.ok()) {
    res.status = HttpStatusOf(r.status());
    res.set_content(Json{{"error", {{"code", CodeName(r.status().code())}, {"message", r.status().message()}}}}.dump(),
                    "application/json");
    return;
  }
  res.status = r->status;
  if (r->status != 204) res.set_content(r->body.dump(), "application/json");
}

Json UserJson(const User& u) { return {{"id", u.id}, {"name", u.name}, {"admin", u.admin}, {"approved", u.approved}}; }

}  // namespace

int HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

ApiServer::ApiServer(Database* db, AccountOptions accounts)
    : db_(db), accounts_(db, accounts), http_(std::make_unique<httplib::Server>()) {}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::Routes() {
  httplib::Server& s = *http_;
  LimitHttpRequests(s);
  // The caller, from the bearer token.
  auto caller = [this](const httplib::Request& req) -> StatusOr<User> {
    const std::string h = req.get_header_value("Authorization");
    if (h.rfind("Bearer ", 0) != 0) return Status::Unauthenticated("no 'Authorization: Bearer <token>' header");
    return accounts_.Authenticate(h.substr(7), WallMillis());
  };
  // Runs `fn` for an authenticated caller, auditing the outcome under `action`.
  auto authed = [this, caller](const std::string& action,
                               std::function<StatusOr<Reply>(const User&, const httplib::Request&)> fn) {
    return [this, caller, action, fn](const httplib::Request& req, httplib::Response& res) {
      auto who = caller(req);
      if (!who.ok()) {
        (void)accounts_.Audit("", action, req.path, "unauthenticated", who.status().message(), WallMillis());
        return Send(res, who.status());
      }
      StatusOr<Reply> r = fn(*who, req);
      (void)accounts_.Audit(who->id, action, req.path, r.ok() ? "ok" : CodeName(r.status().code()),
                            r.ok() ? "" : r.status().message(), WallMillis());
      Send(res, r);
    };
  };
  auto need = [this](const User& u, const std::string& ns, Action a) -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto role, accounts_.RoleIn(u.id, ns));
    if (Allowed(role, u.admin, a)) return Status::OK();
    if (!role && !u.admin) return Status::NotFound("no namespace '" + ns + "' of yours");
    return Status::PermissionDenied(std::string("your role in '") + ns + "' may not " + ActionName(a));
  };

  s.Post("/api/v1/signup", [this](const httplib::Request& req, httplib::Response& res) {
    StatusOr<Reply> r = [&]() -> StatusOr<Reply> {
      TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"name", "password"}));
      TESSERA_ASSIGN_OR_RETURN(std::string name, b.String("name"));
      TESSERA_ASSIGN_OR_RETURN(std::string password, b.String("password"));
      TESSERA_ASSIGN_OR_RETURN(User u, accounts_.SignUp(name, password, WallMillis()));
      (void)accounts_.Audit(u.id, "sign up", "user " + name, "ok", "", WallMillis());
      return Reply{201, {{"user", UserJson(u)}, {"namespace", name}}};
    }();
    Send(res, r);
  });
  s.Post("/api/v1/login", [this](const httplib::Request& req, httplib::Response& res) {
    std::string name;
    StatusOr<Reply> r = [&]() -> StatusOr<Reply> {
      TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"name", "password"}));
      TESSERA_ASSIGN_OR_RETURN(name, b.String("name"));
      TESSERA_ASSIGN_OR_RETURN(std::string password, b.String("password"));
      TESSERA_ASSIGN_OR_RETURN(IssuedToken t, accounts_.Login(name, password, WallMillis()));
      return Reply{200, {{"token", t.token}, {"token_id", t.id}, {"expires_ms", *t.expires_ms}}};
    }();
    (void)accounts_.Audit("", "login", "user " + name, r.ok() ? "ok" : CodeName(r.status().code()), "", WallMillis());
    Send(res, r);
  });
  s.Get("/api/v1/me", authed("read self", [this](const User& u, const httplib::Request&) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT namespace, role FROM memberships WHERE user_id = ? "
                                                         "ORDER BY namespace",
                                                         {u.id}));
          Json ns = Json::array();
          for (const auto& r : rows) ns.push_back({{"name", r.Text(0)}, {"role", r.Text(1)}});
          return Reply{200, {{"user", UserJson(u)}, {"namespaces", ns}}};
        }));
  s.Post("/api/v1/tokens", authed("create token", [this](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body.empty() ? "{}" : req.body, {"label"}));
           TESSERA_ASSIGN_OR_RETURN(auto label, b.OptionalString("label"));
           TESSERA_ASSIGN_OR_RETURN(IssuedToken t, accounts_.CreateApiToken(u.id, label.value_or(""), WallMillis()));
           return Reply{201, {{"id", t.id}, {"token", t.token}}};
         }));
  s.Get("/api/v1/tokens", authed("list tokens", [this](const User& u, const httplib::Request&) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(auto list, accounts_.ListTokens(u.id));
          Json out = Json::array();
          for (const auto& t : list) {
            Json j = {{"id", t.id}, {"kind", t.kind}, {"label", t.label}, {"created_ms", t.created_ms}};
            j["expires_ms"] = t.expires_ms ? Json(*t.expires_ms) : Json();
            j["revoked_ms"] = t.revoked_ms ? Json(*t.revoked_ms) : Json();
            j["last_used_ms"] = t.last_used_ms ? Json(*t.last_used_ms) : Json();
            out.push_back(j);
          }
          return Reply{200, {{"tokens", out}}};
        }));
  s.Delete(R"(/api/v1/tokens/([0-9a-f-]{1,64}))",
           authed("revoke token", [this](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_RETURN_IF_ERROR(accounts_.RevokeToken(u.id, req.matches[1], WallMillis()));
             return Reply{204, {}};
           }));
  s.Post(R"(/api/v1/users/([a-z][a-z0-9-]{0,31})/approve)",
         authed("approve user", [this](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           if (!u.admin) return Status::PermissionDenied("only a server administrator approves users");
           TESSERA_RETURN_IF_ERROR(accounts_.Approve(req.matches[1]));
           return Reply{204, {}};
         }));
  s.Put(R"(/api/v1/namespaces/([a-z][a-z0-9-]{0,31})/members/([a-z][a-z0-9-]{0,31}))",
        authed("set member", [this, need](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(need(u, req.matches[1], Action::kManageMembers));
          TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"role"}));
          TESSERA_ASSIGN_OR_RETURN(std::string role_name, b.String("role"));
          TESSERA_ASSIGN_OR_RETURN(NamespaceRole role, ParseNamespaceRole(role_name));
          TESSERA_RETURN_IF_ERROR(accounts_.SetRole(req.matches[1], req.matches[2], role));
          return Reply{200, {{"namespace", req.matches[1]}, {"user", req.matches[2]}, {"role", role_name}}};
        }));
  s.Delete(R"(/api/v1/namespaces/([a-z][a-z0-9-]{0,31})/members/([a-z][a-z0-9-]{0,31}))",
           authed("remove member", [this, need](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_RETURN_IF_ERROR(need(u, req.matches[1], Action::kManageMembers));
             TESSERA_RETURN_IF_ERROR(accounts_.SetRole(req.matches[1], req.matches[2], std::nullopt));
             return Reply{204, {}};
           }));
  s.Get(R"(/api/v1/namespaces/([a-z][a-z0-9-]{0,31})/audit)",
        authed("read audit", [this, need](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(need(u, req.matches[1], Action::kReadAudit));
          // The actions of the namespace's members (newest first, at most 500).
          TESSERA_ASSIGN_OR_RETURN(
              auto rows, db_->Query("SELECT a.time_ms, u.name, a.action, a.target, a.outcome, a.detail FROM audit a "
                                    "JOIN memberships m ON m.user_id = a.user_id AND m.namespace = ? "
                                    "JOIN users u ON u.id = a.user_id ORDER BY a.time_ms DESC LIMIT 500",
                                    {std::string(req.matches[1])}));
          Json out = Json::array();
          for (const auto& r : rows)
            out.push_back({{"time_ms", r.Int(0)}, {"user", r.Text(1)}, {"action", r.Text(2)}, {"target", r.Text(3)},
                           {"outcome", r.Text(4)}, {"detail", r.Text(5)}});
          return Reply{200, {{"audit", out}}};
        }));
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string code = res.status == 404 ? "not_found" : (res.status == 413 ? "too_large" : "bad_request");
    res.set_content(Json{{"error", {{"code", code}, {"message", "no such endpoint: " + req.method + " " + req.path}}}}.dump(),
                    "application/json");
  });
}

Status ApiServer::Start(const std::string& host, int port) {
  Routes();
  if (port == 0) {
    port_ = http_->bind_to_any_port(host);
    if (port_ <= 0) return Status::Unavailable("cannot bind the API on " + host);
  } else {
    if (!http_->bind_to_port(host, port)) return Status::Unavailable("cannot bind the API on " + host + ":" + std::to_string(port));
    port_ = port;
  }
  thread_ = ServeInBackground(*http_);
  return Status::OK();
}

void ApiServer::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::server
