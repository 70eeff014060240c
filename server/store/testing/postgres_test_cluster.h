// A real PostgreSQL server for tests and benches: initdb into a fresh
// directory under /tmp, listening on a free loopback port (no Unix socket),
// stopped and deleted when the object dies. Run as root, the server runs as
// the "postgres" user (PostgreSQL refuses root). The server is killed by
// the kernel if the test process dies first.
#ifndef QUANTD_SERVER_STORE_TESTING_POSTGRES_TEST_CLUSTER_H_
#define QUANTD_SERVER_STORE_TESTING_POSTGRES_TEST_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "worker/common/status.h"

namespace quantd::server::testing {

struct PostgresClusterOptions {
  // False (tests): fsync and synchronous commit off, for speed. True
  // (benches): PostgreSQL's durable defaults, comparable to SQLite FULL.
  bool durable = false;
  int max_connections = 400;
};

class PostgresTestCluster {
 public:
  // FAILED_PRECONDITION naming the missing package when PostgreSQL's server
  // binaries are not installed.
  static quantd::StatusOr<std::unique_ptr<PostgresTestCluster>> Start(
      const PostgresClusterOptions& options = {});

  // One cluster per process, started on first use and stopped at exit.
  static quantd::StatusOr<PostgresTestCluster*> Shared();

  ~PostgresTestCluster();

  // A new empty database; returns its URI.
  quantd::StatusOr<std::string> CreateDatabase();

  std::string Uri(const std::string& database) const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

 private:
  PostgresTestCluster() = default;
  quantd::Status Init(const PostgresClusterOptions& options);

  std::string bin_dir_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
  int databases_ = 0;
};

// The directory holding PostgreSQL's initdb and postgres, or "" if absent.
std::string PostgresBinDir();

}  // namespace quantd::server::testing

#endif  // QUANTD_SERVER_STORE_TESTING_POSTGRES_TEST_CLUSTER_H_
