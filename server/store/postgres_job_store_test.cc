// What only the PostgreSQL backend has: connecting, concurrent migration by
// several frontends, and surviving lost connections.
#include "server/store/postgres_job_store.h"

#include <postgresql/libpq-fe.h>

#include <thread>

#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/open_job_store.h"
#include "server/store/record_columns.h"
#include "server/store/testing/postgres_test_cluster.h"

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
  EXPECT_EQ((*store)->SchemaVersion(), 1);
  EXPECT_EQ(Query(uri_, "SELECT string_agg(version::text, ',') FROM schema_migrations"), "1");
  auto unknown = OpenJobStore("mysql://x");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetReason(unknown.status()), "INVALID_STORE_URI");
}

TEST_F(PostgresJobStoreTest, UnreachableServerIsUnavailable) {
  PostgresJobStoreOptions options;
  options.uri = "postgresql://postgres@127.0.0.1:1/none";
  options.connect_timeout = absl::Seconds(1);
  auto store = PostgresJobStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(GetReason(store.status()), "STORE_UNAVAILABLE");
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
      if (store.ok() && (*store)->SchemaVersion() == 1) ++opened;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opened.load(), 6);
  EXPECT_EQ(Query(uri_, "SELECT count(*) FROM schema_migrations"), "1");
}

TEST_F(PostgresJobStoreTest, RefusesSchemaNewerThanTheBinary) {
  { ASSERT_TRUE(PostgresJobStore::Open({uri_}).ok()); }
  Query(uri_, "INSERT INTO schema_migrations VALUES (42, 'future', 0)");
  auto store = PostgresJobStore::Open({uri_});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetReason(store.status()), "STORE_SCHEMA_TOO_NEW");
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
  absl::StatusOr<JobRecord> first = (*store)->GetJob("jobs/a");
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
    EXPECT_EQ(GetReason(first.status()), "STORE_UNAVAILABLE");
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
