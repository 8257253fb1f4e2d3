// A test of the server's database layer run on both backends: a SQLite file in a temp
// directory, and a real PostgreSQL started for the test (skipped where it cannot run).
// Instantiate with ::testing::Values("sqlite", "postgresql"). Test-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/files.h"
#include "harness/postgres.h"
#include "server_store/database.h"

namespace tessera::server {

class DatabaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("db-test-");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::string where = dir_ + "/state/server.db";
    if (GetParam() == "postgresql") {
      std::string why;
      pg_ = testing::PostgresServer::Start(&why);
      if (!pg_) GTEST_SKIP() << "PostgreSQL cannot run here: " << why;
      where = pg_->Url();
    }
    auto db = OpenDatabase(where);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    EXPECT_EQ(db_->Kind(), GetParam());
  }
  void TearDown() override {
    db_.reset();
    pg_.reset();
    (void)RemoveAll(dir_);
  }

  std::string dir_;
  std::unique_ptr<testing::PostgresServer> pg_;
  std::unique_ptr<Database> db_;
};

}  // namespace tessera::server
