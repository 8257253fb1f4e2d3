// The server's migrations (see schema.h).
#include "server/schema.h"

namespace tessera::server {

const std::vector<Migration>& ServerSchema() {
  static const std::vector<Migration> schema = {
      {1,
       "accounts, namespaces, tokens, audit",
       {"CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL, "
        "is_admin BIGINT NOT NULL DEFAULT 0, approved BIGINT NOT NULL DEFAULT 1, created_ms BIGINT NOT NULL)",
        "CREATE TABLE namespaces (name TEXT PRIMARY KEY, owner_id TEXT REFERENCES users(id), "
        "created_ms BIGINT NOT NULL)",
        "CREATE TABLE memberships (namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE, "
        "user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, role TEXT NOT NULL, "
        "PRIMARY KEY (namespace, user_id))",
        "CREATE TABLE tokens (id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, "
        "user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, kind TEXT NOT NULL, label TEXT NOT NULL, "
        "created_ms BIGINT NOT NULL, expires_ms BIGINT, revoked_ms BIGINT, last_used_ms BIGINT)",
        "CREATE INDEX tokens_user ON tokens (user_id)",
        "CREATE TABLE audit (id TEXT PRIMARY KEY, time_ms BIGINT NOT NULL, user_id TEXT, action TEXT NOT NULL, "
        "target TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL)",
        "CREATE INDEX audit_time ON audit (time_ms)"}},
  };
  return schema;
}

}  // namespace tessera::server
