// Small helpers the bench binaries share: a monotonic clock in seconds and
// "--name=N" integer flags. Header-only, torch-free.
#ifndef QUANTD_WORKER_COMMON_BENCH_UTIL_H_
#define QUANTD_WORKER_COMMON_BENCH_UTIL_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace quantd::bench {

// Seconds on the steady clock (differences only).
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// True and *value set when `arg` is "<name>=<integer>".
inline bool IntFlag(const char* arg, const char* name, int64_t* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = std::atoll(arg + n + 1);
  return true;
}

}  // namespace quantd::bench

#endif  // QUANTD_WORKER_COMMON_BENCH_UTIL_H_
