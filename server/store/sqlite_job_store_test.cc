// What only the SQLite backend has: its URI form, its file, its pragmas.
#include "server/store/sqlite_job_store.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/record_columns.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"

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
  EXPECT_EQ(bad.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().reason(), "INVALID_STORE_URI");
  EXPECT_FALSE(SqliteJobStore::PathFromUri("sqlite://").ok());
}

TEST(SqliteJobStoreTest, CreatesWalDatabaseWithRecordedMigrations) {
  std::string path = testing::MakeTempDir("sqlite-store") + "/q.db";
  auto store = SqliteJobStore::Open({path});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), 2);
  EXPECT_EQ((*store)->Backend(), "sqlite");
  EXPECT_EQ(QueryText(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryText(path, "SELECT group_concat(version) FROM schema_migrations"), "1,2");
  store->reset();
  // Reopening applies nothing twice.
  ASSERT_TRUE(SqliteJobStore::Open({path}).ok());
  EXPECT_EQ(QueryText(path, "SELECT count(*) FROM schema_migrations"), "2");
}

// A database written by a quantd of schema version 1 (before lease secrets)
// is migrated in place: its jobs keep everything and gain empty lease
// columns, which the lease logic then writes.
TEST(SqliteJobStoreTest, MigratesAVersionOneDatabase) {
  std::string path = testing::MakeTempDir("sqlite-store") + "/q.db";
  v1::Job job;
  job.set_name("jobs/old1");
  job.set_tenant("acme");
  job.set_state(v1::RUNNING);
  job.mutable_spec()->set_model_uri("file:///models/m");
  std::string blob = SerializeDeterministic(job);
  std::string hex;
  for (unsigned char c : blob) absl::StrAppendFormat(&hex, "%02x", c);
  Execute(path, R"sql(
CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL,
                                applied_at INTEGER NOT NULL);
INSERT INTO schema_migrations VALUES (1, 'jobs, labels and events', 0);
CREATE TABLE jobs (
  name TEXT PRIMARY KEY, tenant TEXT NOT NULL, request_id TEXT, request_spec BLOB NOT NULL,
  state INTEGER NOT NULL, device TEXT NOT NULL, create_time INTEGER NOT NULL,
  available_time INTEGER NOT NULL, lease_token INTEGER NOT NULL, lease_expire_time INTEGER,
  last_sequence INTEGER NOT NULL, job BLOB NOT NULL);
CREATE UNIQUE INDEX jobs_by_request_id ON jobs (tenant, request_id);
CREATE INDEX jobs_queue ON jobs (state, create_time, name);
CREATE INDEX jobs_by_tenant ON jobs (tenant, create_time, name);
CREATE INDEX jobs_by_create_time ON jobs (create_time, name);
CREATE INDEX jobs_leases ON jobs (state, lease_expire_time);
CREATE TABLE job_labels (name TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                         PRIMARY KEY (name, key)) WITHOUT ROWID;
CREATE INDEX job_labels_by_pair ON job_labels (key, value, name);
CREATE TABLE job_events (name TEXT NOT NULL, sequence INTEGER NOT NULL, payload BLOB NOT NULL,
                         PRIMARY KEY (name, sequence)) WITHOUT ROWID;
)sql");
  Execute(path, absl::StrCat("INSERT INTO jobs VALUES ('jobs/old1', 'acme', NULL, x'', ",
                             static_cast<int>(v1::RUNNING), ", '', 0, 0, 4, 123, 0, x'", hex, "')")
                    .c_str());

  auto store = SqliteJobStore::Open({path});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), 2);
  auto old = (*store)->GetJob("jobs/old1");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->job.tenant(), "acme");
  EXPECT_EQ(old->job.state(), v1::RUNNING);
  EXPECT_EQ(old->lease_token, 4);
  EXPECT_EQ(old->lease_secret_hash, "");
  EXPECT_EQ(old->lease_holder, "");
  EXPECT_EQ(old->outcome_hash, "");
  auto updated = (*store)->UpdateJob("jobs/old1", [](JobRecord& r, JobUpdate&) {
    r.lease_holder = "sha256:w";
    r.lease_secret_hash = std::string(32, '\x01');
    return quantd::OkStatus();
  });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*store)->GetJob("jobs/old1")->lease_holder, "sha256:w");
  EXPECT_EQ(QueryText(path, "SELECT group_concat(version) FROM schema_migrations"), "1,2");
}

TEST(SqliteJobStoreTest, RefusesSchemaNewerThanTheBinary) {
  std::string path = testing::MakeTempDir("sqlite-store") + "/q.db";
  ASSERT_TRUE(SqliteJobStore::Open({path}).ok());
  Execute(path, "INSERT INTO schema_migrations VALUES (99, 'from the future', 0)");
  auto store = SqliteJobStore::Open({path});
  EXPECT_EQ(store.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.status().reason(), "STORE_SCHEMA_TOO_NEW");
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
  EXPECT_EQ(got.status().code(), quantd::StatusCode::kDataLoss);
  EXPECT_EQ(got.status().reason(), "STORE_CORRUPT");
}

TEST(SqliteJobStoreTest, UnopenablePathIsAnError) {
  auto store = SqliteJobStore::Open({"/nonexistent-dir/sub/q.db"});
  EXPECT_FALSE(store.ok());
}

}  // namespace
}  // namespace quantd::server
