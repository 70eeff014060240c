// PeakRssBytes: the process's peak resident set (the kernel's high-water
// mark), for the figures the CLI and the memory check print.
#ifndef QUANTD_WORKER_COMMON_PEAK_RSS_H_
#define QUANTD_WORKER_COMMON_PEAK_RSS_H_

#include <sys/resource.h>

#include <cstdint>

namespace quantd {

inline uint64_t PeakRssBytes() {
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_PEAK_RSS_H_
