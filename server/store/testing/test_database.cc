#include "server/store/testing/test_database.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "server/store/postgres_job_store.h"
#include "server/store/sqlite_job_store.h"
#include "server/store/testing/postgres_test_cluster.h"
#include "worker/common/status.h"

namespace quantd::server::testing {
namespace {

class SqliteTestDatabase : public TestDatabase {
 public:
  SqliteTestDatabase() : path_(MakeTempDir("quantd-sqlite") + "/quantd.db") {}
  std::string uri() const override { return "sqlite://" + path_; }
  quantd::StatusOr<std::unique_ptr<JobStore>> Open() override {
    SqliteJobStoreOptions options;
    options.path = path_;
    QD_ASSIGN_OR_RETURN(auto store, SqliteJobStore::Open(options));
    return std::unique_ptr<JobStore>(std::move(store));
  }

 private:
  std::string path_;
};

class PostgresTestDatabase : public TestDatabase {
 public:
  explicit PostgresTestDatabase(std::string uri) : uri_(std::move(uri)) {}
  std::string uri() const override { return uri_; }
  quantd::StatusOr<std::unique_ptr<JobStore>> Open() override {
    PostgresJobStoreOptions options;
    options.uri = uri_;
    options.max_connections = 8;
    QD_ASSIGN_OR_RETURN(auto store, PostgresJobStore::Open(options));
    return std::unique_ptr<JobStore>(std::move(store));
  }

 private:
  std::string uri_;
};

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/", prefix, "-XXXXXX");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    std::abort();
  }
  return std::string(buf.data());
}

std::unique_ptr<TestDatabase> NewSqliteTestDatabase() {
  return std::make_unique<SqliteTestDatabase>();
}

std::unique_ptr<TestDatabase> NewPostgresTestDatabase() {
  auto cluster = PostgresTestCluster::Shared();
  if (!cluster.ok()) {
    std::fprintf(stderr, "cannot start PostgreSQL for the test: %s\n",
                 cluster.status().ToString().c_str());
    return nullptr;
  }
  auto uri = (*cluster)->CreateDatabase();
  if (!uri.ok()) {
    std::fprintf(stderr, "cannot create a test database: %s\n", uri.status().ToString().c_str());
    return nullptr;
  }
  return std::make_unique<PostgresTestDatabase>(*uri);
}

std::vector<TestBackend> AllTestBackends() {
  return {{"Sqlite", NewSqliteTestDatabase}, {"Postgres", NewPostgresTestDatabase}};
}

}  // namespace quantd::server::testing
