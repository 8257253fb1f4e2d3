// Database: the platform server's state behind one small interface, over SQLite (embedded: one
// file in WAL mode, the default) or PostgreSQL (`postgresql://...`). SQL is written once, with
// `?` placeholders, in the subset both understand (TEXT, BIGINT, DOUBLE PRECISION; ids are text
// the server makes); the PostgreSQL backend numbers the placeholders ($1, $2, ...).
// Migrations are an ordered list, each applied once in a transaction of its own and recorded in
// schema_migrations, so a server upgraded in place brings an old database forward.
// Thread-safety: every call is serialized on the one connection; a transaction holds it for its
// whole body (InTransaction), whose statements go through the Sql handle it is given.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tessera/status.h"

namespace tessera::server {

using Value = std::variant<std::nullptr_t, int64_t, double, std::string>;

struct Row {
  std::vector<Value> cells;
  bool IsNull(size_t i) const { return std::holds_alternative<std::nullptr_t>(cells.at(i)); }
  // The cell as text ("" for NULL; numbers printed) or as an integer (0 for NULL or text).
  std::string Text(size_t i) const;
  int64_t Int(size_t i) const;
  double Real(size_t i) const;
};

// Statements. Errors: AlreadyExists for a unique or primary key violated, InvalidArgument for
// other constraint failures and bad SQL, Unavailable when the database cannot be reached.
class Sql {
 public:
  virtual ~Sql() = default;
  virtual Status Exec(const std::string& sql, const std::vector<Value>& params = {}) = 0;
  virtual StatusOr<std::vector<Row>> Query(const std::string& sql, const std::vector<Value>& params = {}) = 0;
  // Rows changed by the last Exec.
  virtual int64_t Changes() = 0;
};

class Database : public Sql {
 public:
  // Runs `body` in a transaction: committed when it returns OK, rolled back otherwise.
  virtual Status InTransaction(const std::function<Status(Sql&)>& body) = 0;
  virtual std::string Kind() const = 0;  // "sqlite" or "postgresql"
};

// "postgresql://..." (or "postgres://...") opens PostgreSQL; anything else is a SQLite file
// path (created, with its directory's permission, if missing).
StatusOr<std::unique_ptr<Database>> OpenDatabase(const std::string& where);

struct Migration {
  int version;
  std::string description;
  std::vector<std::string> statements;
};
// Applies every migration newer than the database's, in order. Refuses a database whose
// version is newer than the newest migration known (a newer server wrote it).
Status Migrate(Database& db, const std::vector<Migration>& migrations);
// The version the database is at (0: none applied).
StatusOr<int> SchemaVersion(Database& db);

}  // namespace tessera::server
