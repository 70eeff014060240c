// A stand-in for quantd-worker in the supervisor's tests. It records its
// arguments (and $QUANTD_WORKER_TOKEN and every FAKE_WORKER_SEEN_*
// variable, when set, as "env:NAME=value" lines) in $FAKE_WORKER_DIR/<pid>
// and then behaves as $FAKE_WORKER_MODE
// says: "serve" runs until SIGTERM, "crash" exits with code 3 at once,
// "stubborn" ignores SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

extern char** environ;

namespace {
volatile sig_atomic_t terminated = 0;
void OnTerm(int) { terminated = 1; }
}  // namespace

int main(int argc, char** argv) {
  const char* dir = std::getenv("FAKE_WORKER_DIR");
  const char* mode_env = std::getenv("FAKE_WORKER_MODE");
  std::string mode = mode_env != nullptr ? mode_env : "serve";
  if (dir != nullptr) {
    std::string path = std::string(dir) + "/" + std::to_string(getpid());
    std::ofstream out(path + ".tmp");
    for (int i = 1; i < argc; ++i) out << argv[i] << "\n";
    // quantd hands local workers their credential in the environment.
    if (const char* token = std::getenv("QUANTD_WORKER_TOKEN")) {
      out << "env:QUANTD_WORKER_TOKEN=" << token << "\n";
    }
    // What --local-worker-env passed, for the tests that check it.
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "FAKE_WORKER_SEEN_", 17) == 0) out << "env:" << *e << "\n";
    }
    out.close();
    std::rename((path + ".tmp").c_str(), path.c_str());
  }
  if (mode == "crash") return 3;
  if (mode == "stubborn") {
    signal(SIGTERM, SIG_IGN);
  } else {
    signal(SIGTERM, OnTerm);
  }
  while (!terminated) pause();
  return 0;
}
