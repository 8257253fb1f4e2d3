// The REST API's account routes: sign-up, login, the caller, tokens, approval, members, audit.
#include "common/clock.h"
#include "server/api_routes.h"
#include "server/api_server.h"
#include "server/json_body.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

Json UserJson(const User& u) {
  return {{"id", u.id}, {"name", u.name}, {"admin", u.admin}, {"approved", u.approved}};
}

}  // namespace

void AddAccountRoutes(ApiRoutes& r, Database* db) {
  Accounts& acc = r.accounts();
  r.Note("POST", "/api/v1/signup");
  r.http().Post("/api/v1/signup", [&acc](const httplib::Request& req, httplib::Response& res) {
    StatusOr<Reply> reply = [&]() -> StatusOr<Reply> {
      TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"name", "password"}));
      TESSERA_ASSIGN_OR_RETURN(std::string name, b.String("name"));
      TESSERA_ASSIGN_OR_RETURN(std::string password, b.String("password"));
      TESSERA_ASSIGN_OR_RETURN(User u, acc.SignUp(name, password, WallMillis()));
      (void)acc.Audit(u.id, "sign up", "user " + name, "ok", "", WallMillis());
      return Reply{201, {{"user", UserJson(u)}, {"namespace", name}}};
    }();
    ApiRoutes::Send(res, reply);
  });
  r.Note("POST", "/api/v1/login");
  r.http().Post("/api/v1/login", [&acc](const httplib::Request& req, httplib::Response& res) {
    std::string name;
    StatusOr<Reply> reply = [&]() -> StatusOr<Reply> {
      TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"name", "password"}));
      TESSERA_ASSIGN_OR_RETURN(name, b.String("name"));
      TESSERA_ASSIGN_OR_RETURN(std::string password, b.String("password"));
      TESSERA_ASSIGN_OR_RETURN(IssuedToken t, acc.Login(name, password, WallMillis()));
      return Reply{200, {{"token", t.token}, {"token_id", t.id}, {"expires_ms", *t.expires_ms}}};
    }();
    (void)acc.Audit("", "login", "user " + name, reply.ok() ? "ok" : ErrorCodeName(reply.status().code()), "",
                    WallMillis());
    ApiRoutes::Send(res, reply);
  });
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
  r.Get(std::string("/api/v1/namespaces/") + kNamePattern + "/audit", "read audit",
        [&r, db](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kReadAudit));
          // The actions of the namespace's members (newest first, at most 500).
          TESSERA_ASSIGN_OR_RETURN(
              auto rows,
              db->Query("SELECT a.time_ms, u.name, a.action, a.target, a.outcome, a.detail FROM audit a "
                        "JOIN memberships m ON m.user_id = a.user_id AND m.namespace = ? "
                        "JOIN users u ON u.id = a.user_id ORDER BY a.time_ms DESC LIMIT 500",
                        {std::string(req.matches[1])}));
          Json out = Json::array();
          for (const auto& row : rows)
            out.push_back({{"time_ms", row.Int(0)},
                           {"user", row.Text(1)},
                           {"action", row.Text(2)},
                           {"target", row.Text(3)},
                           {"outcome", row.Text(4)},
                           {"detail", row.Text(5)}});
          return Reply{200, {{"audit", out}}};
        });
}

}  // namespace tessera::server
