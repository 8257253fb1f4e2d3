// Accounts in the database (see accounts.h).
#include "server_store/accounts.h"

#include "common/random.h"
#include "server_store/credentials.h"

namespace tessera::server {
namespace {

User UserFrom(const Row& r) {  // id, name, is_admin, approved
  return {r.Text(0), r.Text(1), r.Int(2) != 0, r.Int(3) != 0};
}

const Status kBadLogin = Status::Unauthenticated("wrong user name or password");

}  // namespace

Status Accounts::CheckUserName(const std::string& name) {
  if (name.empty() || name.size() > 32) return Status::InvalidArgument("a user name has 1 to 32 characters");
  if (name[0] < 'a' || name[0] > 'z') return Status::InvalidArgument("a user name starts with a letter a-z");
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      return Status::InvalidArgument("a user name has only a-z, 0-9 and '-' (it names a namespace too)");
  }
  return Status::OK();
}

StatusOr<User> Accounts::SignUp(const std::string& name, const std::string& password, int64_t now_ms) {
  TESSERA_RETURN_IF_ERROR(CheckUserName(name));
  TESSERA_ASSIGN_OR_RETURN(std::string hash, HashPassword(password));
  User u{NewUuid(), name, false, !o_.require_approval};
  Status s = db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto count, sql.Query("SELECT COUNT(*) FROM users"));
    if (count.at(0).Int(0) == 0) u.admin = u.approved = true;  // the first user runs the server
    TESSERA_ASSIGN_OR_RETURN(auto taken, sql.Query("SELECT name FROM namespaces WHERE name = ?", {name}));
    if (!taken.empty()) return Status::AlreadyExists("the name '" + name + "' is taken");
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("INSERT INTO users (id, name, password_hash, is_admin, approved, created_ms) VALUES (?, ?, "
                 "?, ?, ?, ?)",
                 {u.id, name, hash, int64_t{u.admin}, int64_t{u.approved}, now_ms}));
    TESSERA_RETURN_IF_ERROR(sql.Exec("INSERT INTO namespaces (name, owner_id, created_ms) VALUES (?, ?, ?)",
                                     {name, u.id, now_ms}));
    return sql.Exec("INSERT INTO memberships (namespace, user_id, role) VALUES (?, ?, ?)",
                    {name, u.id, std::string(NamespaceRoleName(NamespaceRole::kAdmin))});
  });
  if (s.code() == StatusCode::kAlreadyExists)
    return Status::AlreadyExists("the name '" + name + "' is taken");
  TESSERA_RETURN_IF_ERROR(s);
  return u;
}

StatusOr<IssuedToken> Accounts::Issue(Sql& sql, const std::string& user_id, const std::string& kind,
                                      const std::string& label, std::optional<int64_t> expires_ms,
                                      int64_t now_ms) {
  IssuedToken t{NewUuid(), NewToken(), kind, expires_ms};
  TESSERA_RETURN_IF_ERROR(
      sql.Exec("INSERT INTO tokens (id, digest, user_id, kind, label, created_ms, expires_ms) VALUES (?, ?, "
               "?, ?, ?, ?, ?)",
               {t.id, TokenDigest(t.token), user_id, kind, label, now_ms,
                expires_ms ? Value(*expires_ms) : Value(nullptr)}));
  return t;
}

StatusOr<IssuedToken> Accounts::Login(const std::string& name, const std::string& password, int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(auto rows,
                           db_->Query("SELECT id, name, is_admin, approved, password_hash FROM users "
                                      "WHERE name = ?",
                                      {name}));
  if (rows.empty()) {
    // The same work as for a wrong password, so the answer's time does not tell names apart.
    static const std::string dummy = HashPassword("not a real password").value_or("");
    (void)VerifyPassword(dummy, password);
    return kBadLogin;
  }
  if (!VerifyPassword(rows[0].Text(4), password)) return kBadLogin;
  User u = UserFrom(rows[0]);
  if (!u.approved) return Status::PermissionDenied("user '" + name + "' awaits an administrator's approval");
  return Issue(*db_, u.id, "session", "login", now_ms + o_.session_ttl_ms, now_ms);
}

StatusOr<IssuedToken> Accounts::CreateApiToken(const std::string& user_id, const std::string& label,
                                               int64_t now_ms) {
  if (label.size() > 200) return Status::InvalidArgument("a token's label has at most 200 characters");
  return Issue(*db_, user_id, "api", label, std::nullopt, now_ms);
}

StatusOr<std::vector<TokenInfo>> Accounts::ListTokens(const std::string& user_id) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT id, kind, label, created_ms, expires_ms, revoked_ms, last_used_ms "
                            "FROM tokens WHERE user_id = ? ORDER BY created_ms, id",
                            {user_id}));
  std::vector<TokenInfo> out;
  auto opt = [](const Row& r, size_t i) {
    return r.IsNull(i) ? std::nullopt : std::optional<int64_t>(r.Int(i));
  };
  for (const Row& r : rows)
    out.push_back({r.Text(0), r.Text(1), r.Text(2), r.Int(3), opt(r, 4), opt(r, 5), opt(r, 6)});
  return out;
}

Status Accounts::RevokeToken(const std::string& user_id, const std::string& token_id, int64_t now_ms) {
  return db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("UPDATE tokens SET revoked_ms = ? WHERE id = ? AND user_id = ? AND revoked_ms IS NULL",
                 {now_ms, token_id, user_id}));
    if (sql.Changes() == 0)
      return Status::NotFound("no token " + token_id + " of yours that is not revoked already");
    return Status::OK();
  });
}

StatusOr<User> Accounts::Authenticate(const std::string& token, int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT u.id, u.name, u.is_admin, u.approved, t.id, t.expires_ms, t.revoked_ms "
                            "FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.digest = ?",
                            {TokenDigest(token)}));
  if (rows.empty()) return Status::Unauthenticated("unknown token (log in again, or make a new API token)");
  const Row& r = rows[0];
  if (!r.IsNull(6)) return Status::Unauthenticated("this token was revoked");
  if (!r.IsNull(5) && r.Int(5) <= now_ms)
    return Status::Unauthenticated("this session has expired: log in again");
  User u = UserFrom(r);
  if (!u.approved)
    return Status::PermissionDenied("user '" + u.name + "' awaits an administrator's approval");
  (void)db_->Exec("UPDATE tokens SET last_used_ms = ? WHERE id = ?", {now_ms, r.Text(4)});
  return u;
}

StatusOr<std::optional<NamespaceRole>> Accounts::RoleIn(const std::string& user_id, const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows,
      db_->Query("SELECT role FROM memberships WHERE namespace = ? AND user_id = ?", {ns, user_id}));
  if (rows.empty()) return std::optional<NamespaceRole>();
  TESSERA_ASSIGN_OR_RETURN(NamespaceRole role, ParseNamespaceRole(rows[0].Text(0)));
  return std::optional<NamespaceRole>(role);
}

StatusOr<User> Accounts::FindUser(const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(
      auto rows, db_->Query("SELECT id, name, is_admin, approved FROM users WHERE name = ?", {name}));
  if (rows.empty()) return Status::NotFound("no user '" + name + "'");
  return UserFrom(rows[0]);
}

Status Accounts::SetRole(const std::string& ns, const std::string& user_name,
                         std::optional<NamespaceRole> role) {
  TESSERA_ASSIGN_OR_RETURN(User u, FindUser(user_name));
  return db_->InTransaction([&](Sql& sql) -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto exists, sql.Query("SELECT name FROM namespaces WHERE name = ?", {ns}));
    if (exists.empty()) return Status::NotFound("no namespace '" + ns + "'");
    TESSERA_RETURN_IF_ERROR(
        sql.Exec("DELETE FROM memberships WHERE namespace = ? AND user_id = ?", {ns, u.id}));
    if (!role) return Status::OK();
    return sql.Exec("INSERT INTO memberships (namespace, user_id, role) VALUES (?, ?, ?)",
                    {ns, u.id, std::string(NamespaceRoleName(*role))});
  });
}

Status Accounts::Approve(const std::string& user_name) {
  TESSERA_RETURN_IF_ERROR(db_->Exec("UPDATE users SET approved = 1 WHERE name = ?", {user_name}));
  if (db_->Changes() == 0) return Status::NotFound("no user '" + user_name + "'");
  return Status::OK();
}

Status Accounts::Audit(const std::string& user_id, const std::string& action, const std::string& target,
                       const std::string& outcome, const std::string& detail, int64_t now_ms) {
  std::string ns = AuditNamespace(target);
  if (ns.empty() && target.rfind("/api/v1/uploads/", 0) == 0) {
    const std::string id = target.substr(
        16, target.find('/', 16) == std::string::npos ? std::string::npos : target.find('/', 16) - 16);
    auto rows = db_->Query("SELECT namespace FROM uploads WHERE id = ?", {id});
    if (rows.ok() && !rows->empty()) ns = (*rows)[0].Text(0);
  }
  return db_->Exec(
      "INSERT INTO audit (id, time_ms, user_id, action, target, outcome, detail, namespace) VALUES (?, ?, ?, "
      "?, "
      "?, ?, ?, ?)",
      {NewUuid(), now_ms, user_id.empty() ? Value(nullptr) : Value(user_id), action, target, outcome, detail,
       ns});
}

std::string AuditNamespace(const std::string& target) {
  const std::string ns_prefix = "/api/v1/namespaces/", job_prefix = "/api/v1/jobs/";
  auto segment = [&](size_t from) {
    const size_t end = target.find('/', from);
    return target.substr(from, end == std::string::npos ? std::string::npos : end - from);
  };
  if (target.rfind(ns_prefix, 0) == 0) return segment(ns_prefix.size());
  if (target.rfind(job_prefix, 0) == 0) {
    // A job's id is its namespace's name, '-' and 8 hexadecimal digits.
    const std::string id = segment(job_prefix.size());
    return id.size() > 9 && id[id.size() - 9] == '-' ? id.substr(0, id.size() - 9) : "";
  }
  if (target.rfind("user ", 0) == 0) return "";  // logins: the server's, not a namespace's
  return "";
}

}  // namespace tessera::server
