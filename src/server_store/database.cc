// The two database backends and the migrations (see database.h).
#include "server_store/database.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <filesystem>
#include <mutex>
#include <pqxx/pqxx>

namespace tessera::server {

std::string Row::Text(size_t i) const {
  const Value& v = cells.at(i);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  if (auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  return "";
}

int64_t Row::Int(size_t i) const {
  const Value& v = cells.at(i);
  if (auto* n = std::get_if<int64_t>(&v)) return *n;
  if (auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (auto* s = std::get_if<std::string>(&v)) {
    try {
      return std::stoll(*s);
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

double Row::Real(size_t i) const {
  const Value& v = cells.at(i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  if (auto* s = std::get_if<std::string>(&v)) {
    try {
      return std::stod(*s);
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

namespace {

// One connection, every call serialized on it; a transaction holds the lock for its body.
class SerializedDatabase : public Database {
 public:
  Status Exec(const std::string& sql, const std::vector<Value>& params) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return inner().Exec(sql, params);
  }
  StatusOr<std::vector<Row>> Query(const std::string& sql, const std::vector<Value>& params) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return inner().Query(sql, params);
  }
  int64_t Changes() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return inner().Changes();
  }

 protected:
  virtual Sql& inner() = 0;
  std::recursive_mutex mu_;
};

// A backend's statements: Exec and Query are one Run (rows or not).
class BackendSql : public Sql {
 public:
  Status Exec(const std::string& sql, const std::vector<Value>& params) override {
    return Run(sql, params, nullptr);
  }
  StatusOr<std::vector<Row>> Query(const std::string& sql, const std::vector<Value>& params) override {
    std::vector<Row> rows;
    TESSERA_RETURN_IF_ERROR(Run(sql, params, &rows));
    return rows;
  }
  int64_t Changes() override { return changes_; }

 protected:
  virtual Status Run(const std::string& sql, const std::vector<Value>& params, std::vector<Row>* rows) = 0;
  int64_t changes_ = 0;
};

// ---- SQLite ----

class SqliteSql : public BackendSql {
 public:
  explicit SqliteSql(SQLite::Database& db) : db_(db) {}

 private:
  Status Run(const std::string& sql, const std::vector<Value>& params, std::vector<Row>* rows) override {
    try {
      SQLite::Statement st(db_, sql);
      for (size_t i = 0; i < params.size(); ++i) {
        const int at = static_cast<int>(i + 1);
        std::visit(
            [&](const auto& v) {
              using T = std::decay_t<decltype(v)>;
              if constexpr (std::is_same_v<T, std::nullptr_t>) {
                st.bind(at);
              } else if constexpr (std::is_same_v<T, int64_t>) {
                st.bind(at, static_cast<int64_t>(v));
              } else {
                st.bind(at, v);
              }
            },
            params[i]);
      }
      if (!rows) {
        changes_ = st.exec();
        return Status::OK();
      }
      while (st.executeStep()) {
        Row r;
        for (int c = 0; c < st.getColumnCount(); ++c) {
          SQLite::Column col = st.getColumn(c);
          if (col.isNull()) {
            r.cells.emplace_back(nullptr);
          } else if (col.isInteger()) {
            r.cells.emplace_back(static_cast<int64_t>(col.getInt64()));
          } else if (col.isFloat()) {
            r.cells.emplace_back(col.getDouble());
          } else {
            r.cells.emplace_back(col.getString());
          }
        }
        rows->push_back(std::move(r));
      }
      return Status::OK();
    } catch (const SQLite::Exception& e) {
      const int code = e.getExtendedErrorCode();
      if (code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY)
        return Status::AlreadyExists(e.what());
      if ((code & 0xff) == SQLITE_CONSTRAINT) return Status::InvalidArgument(e.what());
      if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED)
        return Status::Unavailable(e.what());
      return Status::Internal(std::string("sqlite: ") + e.what());
    }
  }

  SQLite::Database& db_;
};

class SqliteDatabase : public SerializedDatabase {
 public:
  explicit SqliteDatabase(const std::string& path)
      : db_(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_FULLMUTEX), sql_(db_) {
    db_.exec("PRAGMA journal_mode=WAL");
    db_.exec("PRAGMA synchronous=NORMAL");
    db_.exec("PRAGMA foreign_keys=ON");
    db_.setBusyTimeout(5000);
  }
  Status InTransaction(const std::function<Status(Sql&)>& body) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    TESSERA_RETURN_IF_ERROR(sql_.Exec("BEGIN IMMEDIATE", {}));
    Status s = body(sql_);
    Status end = sql_.Exec(s.ok() ? "COMMIT" : "ROLLBACK", {});
    return s.ok() ? end : s;
  }
  std::string Kind() const override { return "sqlite"; }

 private:
  Sql& inner() override { return sql_; }
  SQLite::Database db_;
  SqliteSql sql_;
};

// ---- PostgreSQL ----

// The statement with each `?` (outside string literals) replaced by its parameter as a literal,
// quoted and escaped by the connection (PQescapeLiteral); NULL for null. libpqxx 6 has no
// dynamic parameter list, and literals are as safe as binding when the library escapes them.
StatusOr<std::string> WithLiteralsOrError(pqxx::transaction_base& tx, const std::string& sql,
                                          const std::vector<Value>& params) {
  std::string out;
  size_t n = 0;
  bool quoted = false;
  for (char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c != '?' || quoted) {
      out += c;
      continue;
    }
    if (n >= params.size()) return Status::InvalidArgument("more placeholders than parameters in: " + sql);
    const Value& v = params[n++];
    if (std::holds_alternative<std::nullptr_t>(v)) {
      out += "NULL";
    } else if (auto* i = std::get_if<int64_t>(&v)) {
      out += std::to_string(*i);
    } else if (auto* d = std::get_if<double>(&v)) {
      out += fmt::format("{}::double precision", *d);
    } else {
      out += tx.quote(std::get<std::string>(v));
    }
  }
  if (n != params.size()) return Status::InvalidArgument("fewer placeholders than parameters in: " + sql);
  return out;
}

std::string WithLiterals(pqxx::transaction_base& tx, const std::string& sql,
                         const std::vector<Value>& params) {
  auto s = WithLiteralsOrError(tx, sql, params);
  if (!s.ok()) throw std::invalid_argument(s.status().message());
  return *s;
}

class PgSql : public BackendSql {
 public:
  explicit PgSql(pqxx::connection& c) : c_(c) {}
  void Attach(pqxx::work* tx) { tx_ = tx; }

 private:
  Status Run(const std::string& sql, const std::vector<Value>& params, std::vector<Row>* rows) override {
    try {
      std::optional<pqxx::work> own;
      pqxx::work* tx = tx_;
      if (!tx) tx = &own.emplace(c_);
      pqxx::result r = tx->exec(WithLiterals(*tx, sql, params));
      changes_ = r.affected_rows();
      if (rows) {
        for (const auto& row : r) {
          Row out;
          for (const auto& field : row) {
            if (field.is_null()) {
              out.cells.emplace_back(nullptr);
              continue;
            }
            // Integer columns come back as integers, the rest as text (Row converts).
            const pqxx::oid type = field.type();
            if (type == 20 || type == 21 || type == 23) {  // int8, int2, int4
              out.cells.emplace_back(field.as<int64_t>());
            } else if (type == 700 || type == 701) {  // float4, float8
              out.cells.emplace_back(field.as<double>());
            } else {
              out.cells.emplace_back(field.as<std::string>());
            }
          }
          rows->push_back(std::move(out));
        }
      }
      if (own) own->commit();
      return Status::OK();
    } catch (const pqxx::unique_violation& e) {
      return Status::AlreadyExists(e.what());
    } catch (const pqxx::integrity_constraint_violation& e) {
      return Status::InvalidArgument(e.what());
    } catch (const pqxx::broken_connection& e) {
      return Status::Unavailable(std::string("postgresql: ") + e.what());
    } catch (const std::invalid_argument& e) {
      return Status::InvalidArgument(e.what());
    } catch (const std::exception& e) {
      return Status::Internal(std::string("postgresql: ") + e.what());
    }
  }

  pqxx::connection& c_;
  pqxx::work* tx_ = nullptr;
};

class PgDatabase : public SerializedDatabase {
 public:
  explicit PgDatabase(const std::string& url) : c_(url), sql_(c_) {}
  Status InTransaction(const std::function<Status(Sql&)>& body) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    try {
      pqxx::work tx(c_);
      sql_.Attach(&tx);
      Status s = body(sql_);
      sql_.Attach(nullptr);
      if (s.ok()) tx.commit();  // otherwise the destructor rolls back
      return s;
    } catch (const pqxx::broken_connection& e) {
      sql_.Attach(nullptr);
      return Status::Unavailable(std::string("postgresql: ") + e.what());
    } catch (const std::exception& e) {
      sql_.Attach(nullptr);
      return Status::Internal(std::string("postgresql: ") + e.what());
    }
  }
  std::string Kind() const override { return "postgresql"; }

 private:
  Sql& inner() override { return sql_; }
  pqxx::connection c_;
  PgSql sql_;
};

}  // namespace

StatusOr<std::unique_ptr<Database>> OpenDatabase(const std::string& where) {
  if (where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0) {
    try {
      return std::unique_ptr<Database>(new PgDatabase(where));
    } catch (const std::exception& e) {
      return Status::Unavailable("cannot connect to PostgreSQL: " + std::string(e.what()));
    }
  }
  if (where.empty()) return Status::InvalidArgument("no database file given");
  std::error_code ec;
  const auto dir = std::filesystem::path(where).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  try {
    return std::unique_ptr<Database>(new SqliteDatabase(where));
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot open the SQLite database " + where + ": " + e.what());
  }
}

StatusOr<int> SchemaVersion(Database& db) {
  TESSERA_RETURN_IF_ERROR(db.Exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, "
      "applied_ms BIGINT NOT NULL)"));
  TESSERA_ASSIGN_OR_RETURN(auto rows, db.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  return rows.empty() ? 0 : static_cast<int>(rows[0].Int(0));
}

Status Migrate(Database& db, const std::vector<Migration>& migrations) {
  TESSERA_ASSIGN_OR_RETURN(int have, SchemaVersion(db));
  const int newest = migrations.empty() ? 0 : migrations.back().version;
  if (have > newest) {
    return Status::FailedPrecondition(fmt::format(
        "the database is at schema version {}, newer than this server knows ({}): a newer server wrote it",
        have, newest));
  }
  for (const Migration& m : migrations) {
    if (m.version <= have) continue;
    Status s = db.InTransaction([&](Sql& sql) -> Status {
      for (const auto& statement : m.statements) {
        TESSERA_RETURN_IF_ERROR(sql.Exec(statement));
      }
      return sql.Exec("INSERT INTO schema_migrations (version, description, applied_ms) VALUES (?, ?, ?)",
                      {int64_t{m.version}, m.description,
                       static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count())});
    });
    if (!s.ok()) return s.WithContext(fmt::format("migration {} ({})", m.version, m.description));
  }
  return Status::OK();
}

}  // namespace tessera::server
