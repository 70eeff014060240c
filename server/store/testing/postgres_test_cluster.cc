#include "server/store/testing/postgres_test_cluster.h"

#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <postgresql/libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "worker/common/status.h"

namespace quantd::server::testing {
namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Forks a child that drops to `uid`/`gid` when running as root, sends its
// output to `log`, and execs argv. Returns the pid.
pid_t SpawnAs(const std::vector<std::string>& args, const std::string& log, uid_t uid, gid_t gid) {
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const bool drop = geteuid() == 0;
  pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  if (drop && (setgid(gid) != 0 || setuid(uid) != 0)) _exit(126);
  // After setuid: credential changes clear the parent-death signal.
  prctl(PR_SET_PDEATHSIG, SIGQUIT);
  execv(argv[0], argv.data());
  _exit(127);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string PostgresBinDir() {
  glob_t g;
  std::string best;
  if (glob("/usr/lib/postgresql/*/bin/postgres", 0, nullptr, &g) == 0) {
    std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    // Highest major version: compare numerically ("15" > "9").
    std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
      auto major = [](const std::string& p) {
        return std::atoi(p.c_str() + std::string("/usr/lib/postgresql/").size());
      };
      return major(a) < major(b);
    });
    best = found.back().substr(0, found.back().rfind('/'));
  }
  globfree(&g);
  return best;
}

quantd::StatusOr<std::unique_ptr<PostgresTestCluster>> PostgresTestCluster::Start(
    const PostgresClusterOptions& options) {
  std::unique_ptr<PostgresTestCluster> cluster(new PostgresTestCluster());
  quantd::Status s = cluster->Init(options);
  if (!s.ok()) return s;
  return cluster;
}

quantd::Status PostgresTestCluster::Init(const PostgresClusterOptions& options) {
  bin_dir_ = PostgresBinDir();
  if (bin_dir_.empty()) {
    return quantd::FailedPreconditionError(
        "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; run "
        "tools/install_deps.sh (Debian package postgresql)");
  }
  char pattern[] = "/tmp/quantd-pg-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return quantd::InternalError("mkdtemp failed");
  dir_ = pattern;
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (geteuid() == 0) {
    passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      return quantd::FailedPreconditionError(
          "running as root needs the \"postgres\" user (from the postgresql package)");
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    if (chown(dir_.c_str(), uid, gid) != 0) return quantd::InternalError("chown failed");
  }
  const std::string data = dir_ + "/data";
  const std::string log = dir_ + "/server.log";
  pid_t initdb = SpawnAs({bin_dir_ + "/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E",
                          "UTF8", "--locale=C", "--no-sync"},
                         dir_ + "/initdb.log", uid, gid);
  int status = 0;
  waitpid(initdb, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return quantd::InternalError(absl::StrCat("initdb failed: ", ReadFile(dir_ + "/initdb.log")));
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = FreePort();
    std::vector<std::string> args = {bin_dir_ + "/postgres",
                                     "-D",
                                     data,
                                     "-p",
                                     absl::StrCat(port_),
                                     "-c",
                                     "listen_addresses=127.0.0.1",
                                     "-c",
                                     "unix_socket_directories=",
                                     "-c",
                                     absl::StrCat("max_connections=", options.max_connections),
                                     "-c",
                                     "shared_buffers=64MB"};
    if (!options.durable) {
      for (const char* c : {"fsync=off", "synchronous_commit=off", "full_page_writes=off"}) {
        args.push_back("-c");
        args.push_back(c);
      }
    }
    pid_ = SpawnAs(args, log, uid, gid);
    const std::string conninfo = Uri("postgres") + "?connect_timeout=2";
    for (int i = 0; i < 300; ++i) {
      if (PQping(conninfo.c_str()) == PQPING_OK) return quantd::OkStatus();
      int exited = 0;
      if (waitpid(pid_, &exited, WNOHANG) == pid_) {
        pid_ = 0;
        break;  // probably lost the port race; try another
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (pid_ > 0) {
      kill(pid_, SIGQUIT);
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
  }
  return quantd::UnavailableError(absl::StrCat("PostgreSQL did not start: ", ReadFile(log)));
}

PostgresTestCluster::~PostgresTestCluster() {
  if (pid_ > 0) {
    kill(pid_, SIGINT);  // fast shutdown
    int status;
    for (int i = 0; i < 300; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string PostgresTestCluster::Uri(const std::string& database) const {
  return absl::StrCat("postgresql://postgres@127.0.0.1:", port_, "/", database);
}

quantd::StatusOr<std::string> PostgresTestCluster::CreateDatabase() {
  std::string name = absl::StrCat("quantd_test_", getpid(), "_", ++databases_);
  PGconn* conn = PQconnectdb(Uri("postgres").c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string error = PQerrorMessage(conn);
    PQfinish(conn);
    return quantd::UnavailableError(error);
  }
  PGresult* r = PQexec(conn, absl::StrCat("CREATE DATABASE ", name).c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string error = PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  if (!ok) return quantd::InternalError(error);
  return Uri(name);
}

quantd::StatusOr<PostgresTestCluster*> PostgresTestCluster::Shared() {
  static absl::Mutex mu(absl::kConstInit);
  static PostgresTestCluster* shared = nullptr;
  absl::MutexLock lock(&mu);
  if (shared == nullptr) {
    auto started = Start();
    if (!started.ok()) return started.status();
    shared = started->release();
    std::atexit([] { delete shared; });
  }
  return shared;
}

}  // namespace quantd::server::testing
