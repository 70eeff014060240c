// What only the SQLite backend has: its URI form, its file, its pragmas.
#include "server/store/sqlite_job_store.h"

#include <sqlite3.h>

#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/record_columns.h"
#include "server/store/testing/test_database.h"

namespace quantd::server {
namespace {

std::string QueryText(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::string out;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

void Execute(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << err;
  sqlite3_close(db);
}

TEST(SqliteJobStoreTest, PathFromUri) {
  EXPECT_EQ(*SqliteJobStore::PathFromUri("sqlite:///var/lib/quantd/q.db"), "/var/lib/quantd/q.db");
  EXPECT_EQ(*SqliteJobStore::PathFromUri("sqlite://data/q.db"), "data/q.db");
  auto bad = SqliteJobStore::PathFromUri("postgresql://x");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetReason(bad.status()), "INVALID_STORE_URI");
  EXPECT_FALSE(SqliteJobStore::PathFromUri("sqlite://").ok());
}

TEST(SqliteJobStoreTest, CreatesWalDatabaseWithRecordedMigrations) {
  std::string path = testing::MakeTempDir("sqlite-store") + "/q.db";
  auto store = SqliteJobStore::Open({path});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), 1);
  EXPECT_EQ((*store)->Backend(), "sqlite");
  EXPECT_EQ(QueryText(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryText(path, "SELECT group_concat(version) FROM schema_migrations"), "1");
  store->reset();
  // Reopening applies nothing twice.
  ASSERT_TRUE(SqliteJobStore::Open({path}).ok());
  EXPECT_EQ(QueryText(path, "SELECT count(*) FROM schema_migrations"), "1");
}

TEST(SqliteJobStoreTest, RefusesSchemaNewerThanTheBinary) {
  std::string path = testing::MakeTempDir("sqlite-store") + "/q.db";
  ASSERT_TRUE(SqliteJobStore::Open({path}).ok());
  Execute(path, "INSERT INTO schema_migrations VALUES (99, 'from the future', 0)");
  auto store = SqliteJobStore::Open({path});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetReason(store.status()), "STORE_SCHEMA_TOO_NEW");
}

TEST(SqliteJobStoreTest, CorruptJobBlobIsDataLossNotACrash) {
  std::string path = testing::MakeTempDir("sqlite-store") + "/q.db";
  auto store = SqliteJobStore::Open({path});
  ASSERT_TRUE(store.ok());
  JobRecord record;
  record.job.set_name("jobs/c1");
  record.job.set_state(v1::QUEUED);
  ASSERT_TRUE((*store)->CreateJob(record, {}, {}).ok());
  Execute(path, "UPDATE jobs SET job = x'ffffffff' WHERE name = 'jobs/c1'");
  auto got = (*store)->GetJob("jobs/c1");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(GetReason(got.status()), "STORE_CORRUPT");
}

TEST(SqliteJobStoreTest, UnopenablePathIsAnError) {
  auto store = SqliteJobStore::Open({"/nonexistent-dir/sub/q.db"});
  EXPECT_FALSE(store.ok());
}

}  // namespace
}  // namespace quantd::server
