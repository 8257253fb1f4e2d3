// The REST API's account routes: sign-up, login, the caller, tokens, approval, members, audit.
#include <memory>
#include <mutex>

#include "common/clock.h"
#include "server/api_routes.h"
#include "server/api_server.h"
#include "server_store/json_body.h"
#include "server/login_throttle.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

// The audit lines `where` selects (a condition on `a`, the audit table), newest first, at most 500.
StatusOr<Json> AuditLines(Database* db, const std::string& where, const std::vector<Value>& params) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db->Query("SELECT a.time_ms, COALESCE(u.name, ''), a.action, a.target, a.outcome, a.detail, "
                           "a.namespace FROM audit a LEFT JOIN users u ON u.id = a.user_id WHERE " +
                               where + " ORDER BY a.time_ms DESC LIMIT 500",
                           params));
  Json out = Json::array();
  for (const auto& row : rows)
    out.push_back({{"time_ms", row.Int(0)},
                   {"user", row.Text(1)},
                   {"action", row.Text(2)},
                   {"target", row.Text(3)},
                   {"outcome", row.Text(4)},
                   {"detail", row.Text(5)},
                   {"namespace", row.Text(6)}});
  return out;
}

Json UserJson(const User& u) {
  return {{"id", u.id}, {"name", u.name}, {"admin", u.admin}, {"approved", u.approved}};
}

// Sign-up, and logins: failures slow the account and the client's address down
// (login_throttle.h); every attempt is audited with the address, refused ones too.
void AddSignUpAndLogin(ApiRoutes& r) {
  Accounts& acc = r.accounts();
  r.Note("POST", "/api/v1/signup");
  r.http().Post("/api/v1/signup", [&acc](const httplib::Request& req, httplib::Response& res) {
    StatusOr<Reply> reply = [&]() -> StatusOr<Reply> {
      TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"name", "password"}));
      TESSERA_ASSIGN_OR_RETURN(std::string name, b.String("name"));
      TESSERA_ASSIGN_OR_RETURN(std::string password, b.String("password"));
      TESSERA_ASSIGN_OR_RETURN(User u, acc.SignUp(name, password, WallMillis()));
      (void)acc.Audit(u.id, "sign up", "/api/v1/namespaces/" + name, "ok", "user " + name, WallMillis());
      return Reply{201, {{"user", UserJson(u)}, {"namespace", name}}};
    }();
    ApiRoutes::Send(res, reply);
  });
  r.Note("POST", "/api/v1/login");
  auto throttle = std::make_shared<std::pair<std::mutex, LoginThrottle>>();
  r.http().Post("/api/v1/login", [&acc, throttle](const httplib::Request& req, httplib::Response& res) {
    std::string name, outcome;
    int64_t retry_ms = 0;
    StatusOr<Reply> reply = [&]() -> StatusOr<Reply> {
      TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"name", "password"}));
      TESSERA_ASSIGN_OR_RETURN(name, b.String("name"));
      TESSERA_ASSIGN_OR_RETURN(std::string password, b.String("password"));
      const std::vector<std::string> keys = {"user:" + name, "addr:" + req.remote_addr};
      {
        std::lock_guard<std::mutex> l(throttle->first);
        retry_ms = throttle->second.WaitMs(keys, WallMillis());
      }
      if (retry_ms > 0)
        return Status::ResourceExhausted(
            "too many failed logins for this account or from this address: try again in " +
            std::to_string((retry_ms + 999) / 1000) + " s");
      auto t = acc.Login(name, password, WallMillis());
      std::lock_guard<std::mutex> l(throttle->first);
      if (!t.ok()) {
        if (t.status().code() == StatusCode::kUnauthenticated) throttle->second.Failed(keys, WallMillis());
        return t.status();
      }
      throttle->second.Succeeded(keys);
      return Reply{200, {{"token", t->token}, {"token_id", t->id}, {"expires_ms", *t->expires_ms}}};
    }();
    if (retry_ms > 0) {
      res.set_header("Retry-After", std::to_string((retry_ms + 999) / 1000));
      outcome = "throttled";
    } else {
      outcome = reply.ok() ? "ok" : ErrorCodeName(reply.status().code());
    }
    (void)acc.Audit("", "login", "user " + name, outcome, "from " + req.remote_addr, WallMillis());
    ApiRoutes::Send(res, reply);
  });
}

// The caller and its API tokens.
void AddSelfAndTokenRoutes(ApiRoutes& r, Database* db) {
  Accounts& acc = r.accounts();
  r.Get("/api/v1/me", "read self", [db](const User& u, const httplib::Request&) -> StatusOr<Reply> {
    TESSERA_ASSIGN_OR_RETURN(auto rows, db->Query("SELECT namespace, role FROM memberships WHERE user_id = ? "
                                                  "ORDER BY namespace",
                                                  {u.id}));
    Json ns = Json::array();
    for (const auto& row : rows) ns.push_back({{"name", row.Text(0)}, {"role", row.Text(1)}});
    return Reply{200, {{"user", UserJson(u)}, {"namespaces", ns}}};
  });
  r.Post("/api/v1/tokens", "create token",
         [&acc](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body.empty() ? "{}" : req.body, {"label"}));
           TESSERA_ASSIGN_OR_RETURN(auto label, b.OptionalString("label"));
           TESSERA_ASSIGN_OR_RETURN(IssuedToken t,
                                    acc.CreateApiToken(u.id, label.value_or(""), WallMillis()));
           return Reply{201, {{"id", t.id}, {"token", t.token}}};
         });
  r.Get("/api/v1/tokens", "list tokens", [&acc](const User& u, const httplib::Request&) -> StatusOr<Reply> {
    TESSERA_ASSIGN_OR_RETURN(auto list, acc.ListTokens(u.id));
    Json out = Json::array();
    for (const auto& t : list) {
      Json j = {{"id", t.id}, {"kind", t.kind}, {"label", t.label}, {"created_ms", t.created_ms}};
      j["expires_ms"] = t.expires_ms ? Json(*t.expires_ms) : Json();
      j["revoked_ms"] = t.revoked_ms ? Json(*t.revoked_ms) : Json();
      j["last_used_ms"] = t.last_used_ms ? Json(*t.last_used_ms) : Json();
      out.push_back(j);
    }
    return Reply{200, {{"tokens", out}}};
  });
  r.Delete(R"(/api/v1/tokens/([0-9a-f-]{1,64}))", "revoke token",
           [&acc](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_RETURN_IF_ERROR(acc.RevokeToken(u.id, req.matches[1], WallMillis()));
             return Reply{204, {}};
           });
}

// The server's users (administrators) and a namespace's members.
void AddUserAndMemberRoutes(ApiRoutes& r, Database* db) {
  Accounts& acc = r.accounts();
  r.Get("/api/v1/users", "list users", [db](const User& u, const httplib::Request&) -> StatusOr<Reply> {
    if (!u.admin) return Status::PermissionDenied("only a server administrator lists the users");
    TESSERA_ASSIGN_OR_RETURN(
        auto rows, db->Query("SELECT name, is_admin, approved, created_ms FROM users ORDER BY name"));
    Json out = Json::array();
    for (const auto& row : rows)
      out.push_back({{"name", row.Text(0)},
                     {"admin", row.Int(1) != 0},
                     {"approved", row.Int(2) != 0},
                     {"created_ms", row.Int(3)}});
    return Reply{200, {{"users", out}}};
  });
  r.Get(std::string("/api/v1/namespaces/") + kNamePattern + "/members", "list members",
        [&r, db](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kManageMembers));
          TESSERA_ASSIGN_OR_RETURN(auto rows,
                                   db->Query("SELECT u.name, m.role FROM memberships m JOIN users u ON "
                                             "u.id = m.user_id WHERE m.namespace = ? ORDER BY u.name",
                                             {std::string(req.matches[1])}));
          Json out = Json::array();
          for (const auto& row : rows) out.push_back({{"user", row.Text(0)}, {"role", row.Text(1)}});
          return Reply{200, {{"members", out}}};
        });
  r.Post(std::string("/api/v1/users/") + kNamePattern + "/approve", "approve user",
         [&acc](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           if (!u.admin) return Status::PermissionDenied("only a server administrator approves users");
           TESSERA_RETURN_IF_ERROR(acc.Approve(req.matches[1]));
           return Reply{204, {}};
         });
  r.Put(std::string("/api/v1/namespaces/") + kNamePattern + "/members/" + kNamePattern, "set member",
        [&r, &acc](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kManageMembers));
          TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"role"}));
          TESSERA_ASSIGN_OR_RETURN(std::string role_name, b.String("role"));
          TESSERA_ASSIGN_OR_RETURN(NamespaceRole role, ParseNamespaceRole(role_name));
          TESSERA_RETURN_IF_ERROR(acc.SetRole(req.matches[1], req.matches[2], role));
          return Reply{200, {{"namespace", req.matches[1]}, {"user", req.matches[2]}, {"role", role_name}}};
        });
  r.Delete(std::string("/api/v1/namespaces/") + kNamePattern + "/members/" + kNamePattern, "remove member",
           [&r, &acc](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kManageMembers));
             TESSERA_RETURN_IF_ERROR(acc.SetRole(req.matches[1], req.matches[2], std::nullopt));
             return Reply{204, {}};
           });
}

// The audit log: the server's (administrators), a namespace's.
void AddAuditRoutes(ApiRoutes& r, Database* db) {
  r.Get("/api/v1/audit", "read server audit",
        [db](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          if (!u.admin) return Status::PermissionDenied("the server's audit log is for its administrators");
          // Everything, or one action (?action=login: every login, failed, throttled or not).
          const std::string action = req.has_param("action") ? req.get_param_value("action") : "";
          TESSERA_ASSIGN_OR_RETURN(Json out, AuditLines(db, "? = '' OR a.action = ?", {action, action}));
          return Reply{200, {{"audit", out}}};
        });
  r.Get(std::string("/api/v1/namespaces/") + kNamePattern + "/audit", "read audit",
        [&r, db](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kReadAudit));
          // What was done to the namespace and its jobs, data sets and uploads, by anyone; not
          // what its members did elsewhere.
          TESSERA_ASSIGN_OR_RETURN(Json out,
                                   AuditLines(db, "a.namespace = ?", {std::string(req.matches[1])}));
          return Reply{200, {{"audit", out}}};
        });
}

}  // namespace

void AddAccountRoutes(ApiRoutes& r, Database* db) {
  AddSignUpAndLogin(r);
  AddSelfAndTokenRoutes(r, db);
  AddUserAndMemberRoutes(r, db);
  AddAuditRoutes(r, db);
}

}  // namespace tessera::server
