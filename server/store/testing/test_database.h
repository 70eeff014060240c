// Databases for tests that run against every JobStore backend. Each
// TestDatabase is a fresh, empty database that can be opened several times
// (to test restarts and several frontends on one database).
#ifndef QUANTD_SERVER_STORE_TESTING_TEST_DATABASE_H_
#define QUANTD_SERVER_STORE_TESTING_TEST_DATABASE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "server/store/job_store.h"
#include "worker/common/status.h"

namespace quantd::server::testing {

class TestDatabase {
 public:
  virtual ~TestDatabase() = default;
  // The --store URI of this database.
  virtual std::string uri() const = 0;
  // A new connection (a new JobStore) to this database.
  virtual quantd::StatusOr<std::unique_ptr<JobStore>> Open() = 0;
};

// A backend the suites run against: a name for the test instantiation and a
// factory of fresh databases.
struct TestBackend {
  std::string name;
  std::function<std::unique_ptr<TestDatabase>()> create;
};

// Names the backend in test output instead of dumping its bytes.
inline void PrintTo(const TestBackend& backend, std::ostream* os) { *os << backend.name; }

// A fresh directory under $TEST_TMPDIR (or /tmp), removed by the caller.
std::string MakeTempDir(const std::string& prefix);

// A SQLite database file in a fresh temporary directory.
std::unique_ptr<TestDatabase> NewSqliteTestDatabase();

// A database in the process's shared PostgreSQL test cluster (started on
// first use); nullptr, with the reason on stderr, when it cannot start.
std::unique_ptr<TestDatabase> NewPostgresTestDatabase();

// Every backend: SQLite and PostgreSQL (tools/install_deps.sh installs
// PostgreSQL; without it the PostgreSQL instantiations fail, loudly).
std::vector<TestBackend> AllTestBackends();

}  // namespace quantd::server::testing

#endif  // QUANTD_SERVER_STORE_TESTING_TEST_DATABASE_H_
