#include "server/store/testing/test_database.h"

#include <stdlib.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "server/store/sqlite_job_store.h"

namespace quantd::server::testing {
namespace {

class SqliteTestDatabase : public TestDatabase {
 public:
  SqliteTestDatabase() : path_(MakeTempDir("quantd-sqlite") + "/quantd.db") {}
  std::string uri() const override { return "sqlite://" + path_; }
  absl::StatusOr<std::unique_ptr<JobStore>> Open() override {
    SqliteJobStoreOptions options;
    options.path = path_;
    auto store = SqliteJobStore::Open(options);
    if (!store.ok()) return store.status();
    return std::unique_ptr<JobStore>(std::move(*store));
  }

 private:
  std::string path_;
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

std::vector<TestBackend> AllTestBackends() { return {{"Sqlite", NewSqliteTestDatabase}}; }

}  // namespace quantd::server::testing
