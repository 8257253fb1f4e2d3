// The server's migrations (see schema.h).
#include "server_store/schema.h"

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
        "user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, kind TEXT NOT NULL, label TEXT NOT "
        "NULL, "
        "created_ms BIGINT NOT NULL, expires_ms BIGINT, revoked_ms BIGINT, last_used_ms BIGINT)",
        "CREATE INDEX tokens_user ON tokens (user_id)",
        "CREATE TABLE audit (id TEXT PRIMARY KEY, time_ms BIGINT NOT NULL, user_id TEXT, action TEXT NOT "
        "NULL, "
        "target TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL)",
        "CREATE INDEX audit_time ON audit (time_ms)"}},
      {2,
       "uploads, data sets, shares, code packages, jobs, quotas",
       {"CREATE TABLE uploads (id TEXT PRIMARY KEY, namespace TEXT NOT NULL REFERENCES namespaces(name), "
        "name TEXT NOT NULL, format TEXT NOT NULL, options TEXT NOT NULL, state TEXT NOT NULL, error TEXT "
        "NOT NULL, "
        "owner_id TEXT NOT NULL REFERENCES users(id), created_ms BIGINT NOT NULL)",
        "CREATE UNIQUE INDEX uploads_active ON uploads (namespace, name) WHERE state IN ('receiving', "
        "'importing')",
        "CREATE TABLE upload_files (upload_id TEXT NOT NULL REFERENCES uploads(id) ON DELETE CASCADE, "
        "file TEXT NOT NULL, size BIGINT NOT NULL, sha256 TEXT NOT NULL, received BIGINT NOT NULL, "
        "PRIMARY KEY (upload_id, file))",
        "CREATE TABLE datasets (namespace TEXT NOT NULL REFERENCES namespaces(name), name TEXT NOT NULL, "
        "format TEXT NOT NULL, record_type TEXT NOT NULL, records BIGINT NOT NULL, bytes BIGINT NOT NULL, "
        "chunks BIGINT NOT NULL, owner_id TEXT NOT NULL REFERENCES users(id), created_ms BIGINT NOT NULL, "
        "PRIMARY KEY (namespace, name))",
        "CREATE TABLE dataset_shares (namespace TEXT NOT NULL, name TEXT NOT NULL, "
        "shared_with TEXT NOT NULL REFERENCES namespaces(name), PRIMARY KEY (namespace, name, shared_with))",
        "CREATE TABLE packages (namespace TEXT NOT NULL REFERENCES namespaces(name), digest TEXT NOT NULL, "
        "bytes BIGINT NOT NULL, files BIGINT NOT NULL, created_ms BIGINT NOT NULL, PRIMARY KEY (namespace, "
        "digest))",
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, namespace TEXT NOT NULL REFERENCES namespaces(name), "
        "name TEXT NOT NULL, owner_id TEXT NOT NULL REFERENCES users(id), spec TEXT NOT NULL, state TEXT NOT "
        "NULL, "
        "reason TEXT NOT NULL, priority BIGINT NOT NULL, dataset_ns TEXT NOT NULL, dataset TEXT NOT NULL, "
        "trainers BIGINT NOT NULL, submitted_ms BIGINT NOT NULL, started_ms BIGINT, ended_ms BIGINT, "
        "backend TEXT NOT NULL, handle TEXT NOT NULL, workers TEXT NOT NULL, result TEXT NOT NULL, "
        "metrics_next BIGINT NOT NULL, stop_requested BIGINT NOT NULL)",
        "CREATE INDEX jobs_namespace ON jobs (namespace, submitted_ms)",
        "CREATE INDEX jobs_state ON jobs (state)",
        "CREATE TABLE job_events (id TEXT PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE "
        "CASCADE, "
        "time_ms BIGINT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL)",
        "CREATE INDEX job_events_job ON job_events (job_id, time_ms)",
        "CREATE TABLE job_metrics (job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, seq BIGINT "
        "NOT NULL, "
        "point TEXT NOT NULL, PRIMARY KEY (job_id, seq))",
        "CREATE TABLE quotas (namespace TEXT PRIMARY KEY REFERENCES namespaces(name), limits TEXT NOT NULL, "
        "over TEXT NOT NULL)"}},
      {3,
       "sandboxes: each namespace's job user; jobs' disk use; the audit by namespace",
       {"CREATE TABLE job_users (namespace TEXT PRIMARY KEY REFERENCES namespaces(name), uid BIGINT NOT NULL "
        "UNIQUE)",
        "ALTER TABLE jobs ADD COLUMN disk_bytes BIGINT NOT NULL DEFAULT 0",
        // Each audit line under the namespace it acted on (what that namespace's audit shows).
        "ALTER TABLE audit ADD COLUMN namespace TEXT NOT NULL DEFAULT ''",
        "CREATE INDEX audit_namespace ON audit (namespace, time_ms)"}},
  };
  return schema;
}

}  // namespace tessera::server
