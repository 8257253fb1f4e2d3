// Accounts: users, their namespaces and roles, sessions and API tokens, and the audit log, kept
// in the server's database (schema.h). Sign-up makes a user and a namespace of the same name in
// which they are admin; the very first user is also a server administrator. With
// require_approval, later users cannot log in until an administrator approves them. Logging in
// gives a session token (expiring); API tokens do not expire; both can be revoked and are
// stored only as digests. A wrong name and a wrong password fail alike. Times are passed in
// (milliseconds since the epoch). Thread-safe as the database is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server_store/authz.h"
#include "server_store/database.h"

namespace tessera::server {

struct AccountOptions {
  bool require_approval = false;
  int64_t session_ttl_ms = 7LL * 24 * 3600 * 1000;
};

struct User {
  std::string id, name;
  bool admin = false;
  bool approved = true;
};

struct IssuedToken {
  std::string id;     // names the token (to list and revoke it); not a secret
  std::string token;  // the secret, shown once
  std::string kind;   // "session" or "api"
  std::optional<int64_t> expires_ms;
};

struct TokenInfo {
  std::string id, kind, label;
  int64_t created_ms = 0;
  std::optional<int64_t> expires_ms, revoked_ms, last_used_ms;
};

class Accounts {
 public:
  Accounts(Database* db, AccountOptions options) : db_(db), o_(options) {}

  // A user name: 1-32 of [a-z0-9-], starting with a letter (it names their namespace too).
  static Status CheckUserName(const std::string& name);

  StatusOr<User> SignUp(const std::string& name, const std::string& password, int64_t now_ms);
  StatusOr<IssuedToken> Login(const std::string& name, const std::string& password, int64_t now_ms);
  StatusOr<IssuedToken> CreateApiToken(const std::string& user_id, const std::string& label, int64_t now_ms);
  StatusOr<std::vector<TokenInfo>> ListTokens(const std::string& user_id);
  // NotFound unless the token is the user's.
  Status RevokeToken(const std::string& user_id, const std::string& token_id, int64_t now_ms);
  // The user a bearer token belongs to: Unauthenticated when unknown, revoked or expired.
  StatusOr<User> Authenticate(const std::string& token, int64_t now_ms);
  StatusOr<std::optional<NamespaceRole>> RoleIn(const std::string& user_id, const std::string& ns);
  Status SetRole(const std::string& ns, const std::string& user_name, std::optional<NamespaceRole> role);
  Status Approve(const std::string& user_name);
  StatusOr<User> FindUser(const std::string& name);

  // One line of the audit log: who (user id, "" for nobody), did what, to what (an API path, or
  // "user NAME" for a login), and how it went. It is filed under the namespace the target belongs
  // to (AuditNamespace; an upload's, by its record), which is what that namespace's audit shows.
  Status Audit(const std::string& user_id, const std::string& action, const std::string& target,
               const std::string& outcome, const std::string& detail, int64_t now_ms);

 private:
  StatusOr<IssuedToken> Issue(Sql& sql, const std::string& user_id, const std::string& kind,
                              const std::string& label, std::optional<int64_t> expires_ms, int64_t now_ms);
  Database* db_;
  AccountOptions o_;
};

// The namespace an API path acts on: /api/v1/namespaces/NS/..., /api/v1/jobs/NS-xxxxxxxx/...;
// "" for anything else (pure).
std::string AuditNamespace(const std::string& target);

}  // namespace tessera::server
