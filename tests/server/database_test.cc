// The platform server's database layer against a real SQLite file and a real PostgreSQL (started
// on a temp dir): the same SQL on both, placeholders, NULLs, unique violations, transactions that
// roll back, and migrations applied once and refused when the database is newer.
#include "server_store/database.h"

#include <gtest/gtest.h>

#include "common/files.h"
#include "server/db_fixture.h"

namespace tessera::server {
namespace {

const std::vector<Migration> kMigrations = {
    {1,
     "items",
     {"CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, size BIGINT, score DOUBLE "
      "PRECISION)"}},
    {2,
     "item owners",
     {"ALTER TABLE items ADD COLUMN owner TEXT", "CREATE INDEX items_owner ON items (owner)"}},
};

TEST_P(DatabaseTest, TheSameSqlWorksOnBoth) {
  ASSERT_TRUE(Migrate(*db_, kMigrations).ok());
  EXPECT_EQ(*SchemaVersion(*db_), 2);
  ASSERT_TRUE(db_->Exec("INSERT INTO items (id, name, size, score, owner) VALUES (?, ?, ?, ?, ?)",
                        {std::string("a"), std::string("it's one"), int64_t{1} << 40, 0.5, nullptr})
                  .ok());
  ASSERT_TRUE(db_->Exec("INSERT INTO items (id, name, size) VALUES (?, ?, ?)",
                        {std::string("b"), std::string("two"), int64_t{2}})
                  .ok());
  auto rows =
      db_->Query("SELECT id, name, size, score, owner FROM items WHERE size > ? ORDER BY id", {int64_t{0}});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].Text(1), "it's one");
  EXPECT_EQ((*rows)[0].Int(2), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ((*rows)[0].Real(3), 0.5);
  EXPECT_TRUE((*rows)[0].IsNull(4));
  EXPECT_TRUE((*rows)[1].IsNull(3));

  // A unique name taken: AlreadyExists, nothing changed.
  Status dup =
      db_->Exec("INSERT INTO items (id, name) VALUES (?, ?)", {std::string("c"), std::string("two")});
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists) << dup;
  ASSERT_TRUE(db_->Exec("UPDATE items SET owner = ? WHERE size < ?", {std::string("u1"), int64_t{10}}).ok());
  EXPECT_EQ(db_->Changes(), 1);
}

TEST_P(DatabaseTest, AFailedTransactionLeavesNothing) {
  ASSERT_TRUE(Migrate(*db_, kMigrations).ok());
  Status s = db_->InTransaction([](Sql& sql) -> Status {
    TESSERA_RETURN_IF_ERROR(sql.Exec("INSERT INTO items (id, name) VALUES ('x', 'x')"));
    TESSERA_RETURN_IF_ERROR(sql.Exec("INSERT INTO items (id, name) VALUES ('y', 'x')"));  // name taken
    return Status::OK();
  });
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(db_->Query("SELECT id FROM items")->empty());
  // A body that returns an error of its own rolls back too; one that succeeds commits.
  (void)db_->InTransaction([](Sql& sql) -> Status {
    (void)sql.Exec("INSERT INTO items (id, name) VALUES ('z', 'z')");
    return Status::FailedPrecondition("changed my mind");
  });
  EXPECT_TRUE(db_->Query("SELECT id FROM items")->empty());
  ASSERT_TRUE(
      db_->InTransaction([](Sql& sql) { return sql.Exec("INSERT INTO items (id, name) VALUES ('w', 'w')"); })
          .ok());
  EXPECT_EQ(db_->Query("SELECT id FROM items")->size(), 1u);
}

TEST_P(DatabaseTest, MigrationsRunOnceAndANewerDatabaseIsRefused) {
  ASSERT_TRUE(Migrate(*db_, {kMigrations[0]}).ok());
  EXPECT_EQ(*SchemaVersion(*db_), 1);
  ASSERT_TRUE(Migrate(*db_, kMigrations).ok());  // brings it forward
  ASSERT_TRUE(Migrate(*db_, kMigrations).ok());  // and again: nothing to do
  EXPECT_EQ(*SchemaVersion(*db_), 2);
  Status older = Migrate(*db_, {kMigrations[0]});
  EXPECT_EQ(older.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(older.message().find("newer than this server knows"), std::string::npos) << older;
  // A migration that fails is not recorded, and what it did is rolled back where the database can.
  Status bad =
      Migrate(*db_, {kMigrations[0], kMigrations[1], {3, "broken", {"CREATE TABLE t3 (a TEXT)", "NOT SQL"}}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("migration 3 (broken)"), std::string::npos) << bad;
  EXPECT_EQ(*SchemaVersion(*db_), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, DatabaseTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
