// What only the PostgreSQL backend has: connecting, concurrent migration by
// several frontends, and surviving lost connections.
#include "server/store/postgres_job_store.h"

#include <postgresql/libpq-fe.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/open_job_store.h"
#include "server/store/record_columns.h"
#include "server/store/testing/postgres_test_cluster.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

using testing::PostgresTestCluster;

std::string Query(const std::string& uri, const std::string& sql) {
  PGconn* conn = PQconnectdb(uri.c_str());
  PGresult* r = PQexec(conn, sql.c_str());
  std::string out;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
  EXPECT_TRUE(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
      << PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  return out;
}

JobRecord Record(const std::string& id) {
  JobRecord record;
  record.job.set_name("jobs/" + id);
  record.job.set_state(v1::QUEUED);
  return record;
}

class PostgresJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = PostgresTestCluster::Shared();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *cluster;
    auto uri = cluster_->CreateDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status();
    uri_ = *uri;
  }
  PostgresTestCluster* cluster_ = nullptr;
  std::string uri_;
};

TEST_F(PostgresJobStoreTest, OpensThroughTheStoreUri) {
  auto store = OpenJobStore(uri_);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Backend(), "postgresql");
  EXPECT_EQ((*store)->SchemaVersion(), 2);
  EXPECT_EQ(Query(uri_,
                  "SELECT string_agg(version::text, ',' ORDER BY version) FROM "
                  "schema_migrations"),
            "1,2");
  auto unknown = OpenJobStore("mysql://x");
  EXPECT_EQ(unknown.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().reason(), "INVALID_STORE_URI");
}

TEST_F(PostgresJobStoreTest, UnreachableServerIsUnavailable) {
  PostgresJobStoreOptions options;
  options.uri = "postgresql://postgres@127.0.0.1:1/none";
  options.connect_timeout = absl::Seconds(1);
  auto store = PostgresJobStore::Open(options);
  EXPECT_EQ(store.status().code(), quantd::StatusCode::kUnavailable);
  EXPECT_EQ(store.status().reason(), "STORE_UNAVAILABLE");
  EXPECT_NE(store.status().message().find("cannot connect"), std::string::npos);
}

TEST_F(PostgresJobStoreTest, FrontendsStartingTogetherMigrateOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      PostgresJobStoreOptions options;
      options.uri = uri_;
      auto store = PostgresJobStore::Open(options);
      EXPECT_TRUE(store.ok()) << store.status();
      if (store.ok() && (*store)->SchemaVersion() == 2) ++opened;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opened.load(), 6);
  EXPECT_EQ(Query(uri_, "SELECT count(*) FROM schema_migrations"), "2");
}

// A database of schema version 1 (before lease secrets) is migrated in
// place: its jobs keep everything and gain empty lease columns.
TEST_F(PostgresJobStoreTest, MigratesAVersionOneDatabase) {
  v1::Job job;
  job.set_name("jobs/old1");
  job.set_tenant("acme");
  job.set_state(v1::RUNNING);
  std::string hex;
  for (unsigned char c : SerializeDeterministic(job)) absl::StrAppendFormat(&hex, "%02x", c);
  Query(uri_, R"sql(
CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL,
                                applied_at BIGINT NOT NULL);
INSERT INTO schema_migrations VALUES (1, 'jobs, labels and events', 0);
CREATE TABLE jobs (
  name TEXT COLLATE "C" PRIMARY KEY, tenant TEXT NOT NULL, request_id TEXT,
  request_spec BYTEA NOT NULL, state BIGINT NOT NULL, device TEXT NOT NULL,
  create_time BIGINT NOT NULL, available_time BIGINT NOT NULL, lease_token BIGINT NOT NULL,
  lease_expire_time BIGINT, last_sequence BIGINT NOT NULL, job BYTEA NOT NULL);
CREATE UNIQUE INDEX jobs_by_request_id ON jobs (tenant, request_id);
CREATE INDEX jobs_queue ON jobs (state, create_time, name);
CREATE INDEX jobs_by_tenant ON jobs (tenant, create_time, name);
CREATE INDEX jobs_by_create_time ON jobs (create_time, name);
CREATE INDEX jobs_leases ON jobs (state, lease_expire_time);
CREATE TABLE job_labels (name TEXT COLLATE "C" NOT NULL, key TEXT NOT NULL,
                         value TEXT NOT NULL, PRIMARY KEY (name, key));
CREATE INDEX job_labels_by_pair ON job_labels (key, value, name);
CREATE TABLE job_events (name TEXT COLLATE "C" NOT NULL, sequence BIGINT NOT NULL,
                         payload BYTEA NOT NULL, PRIMARY KEY (name, sequence));
)sql");
  Query(uri_, absl::StrCat("INSERT INTO jobs VALUES ('jobs/old1', 'acme', NULL, ''::bytea, ",
                           static_cast<int>(v1::RUNNING), ", '', 0, 0, 4, 123, 0, '\\x", hex,
                           "'::bytea)"));

  auto store = PostgresJobStore::Open({uri_});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), 2);
  auto old = (*store)->GetJob("jobs/old1");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->job.tenant(), "acme");
  EXPECT_EQ(old->lease_token, 4);
  EXPECT_EQ(old->lease_secret_hash, "");
  EXPECT_EQ(old->lease_holder, "");
  EXPECT_EQ(old->outcome_hash, "");
  auto updated = (*store)->UpdateJob("jobs/old1", [](JobRecord& r, JobUpdate&) {
    r.lease_holder = "sha256:w";
    r.lease_secret_hash = std::string(32, '\0');
    return quantd::OkStatus();
  });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*store)->GetJob("jobs/old1")->lease_secret_hash, std::string(32, '\0'));
}

TEST_F(PostgresJobStoreTest, RefusesSchemaNewerThanTheBinary) {
  { ASSERT_TRUE(PostgresJobStore::Open({uri_}).ok()); }
  Query(uri_, "INSERT INTO schema_migrations VALUES (42, 'future', 0)");
  auto store = PostgresJobStore::Open({uri_});
  EXPECT_EQ(store.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.status().reason(), "STORE_SCHEMA_TOO_NEW");
}

TEST_F(PostgresJobStoreTest, RecoversAfterItsConnectionsAreKilled) {
  PostgresJobStoreOptions options;
  options.uri = uri_;
  auto store = PostgresJobStore::Open(options);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateJob(Record("a"), {}, {}).ok());
  // An administrator (or a failover) drops every quantd connection.
  Query(uri_,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
        "'quantd' AND pid <> pg_backend_pid()");
  // The pooled connection is dead: the first call says so, and the pool
  // replaces it; nothing is lost.
  quantd::StatusOr<JobRecord> first = (*store)->GetJob("jobs/a");
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), quantd::StatusCode::kUnavailable) << first.status();
    EXPECT_EQ(first.status().reason(), "STORE_UNAVAILABLE");
  }
  auto again = (*store)->GetJob("jobs/a");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->job.state(), v1::QUEUED);
  EXPECT_TRUE((*store)->CreateJob(Record("b"), {}, {}).ok());
}

TEST_F(PostgresJobStoreTest, PoolBoundsConnections) {
  PostgresJobStoreOptions options;
  options.uri = uri_;
  options.max_connections = 2;
  auto store = PostgresJobStore::Open(options);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateJob(Record("p"), {}, {}).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        if (!(*store)->GetJob("jobs/p").ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(std::stoi(Query(uri_,
                            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                            "'quantd' AND datname = current_database()")),
            2);
}

}  // namespace
}  // namespace quantd::server
