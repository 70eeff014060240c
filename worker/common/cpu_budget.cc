#include "worker/common/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace quantd {
namespace {

// The first `limit` bytes of a small kernel file; nullopt when unreadable.
std::optional<std::string> ReadSmall(const std::string& path, size_t limit = 4096) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string out(limit, '\0');
  in.read(out.data(), static_cast<std::streamsize>(limit));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// "QUOTA PERIOD" (v2 cpu.max; "max" is no limit) or the v1 pair, as CPUs.
std::optional<double> QuotaCpus(const std::string& quota, const std::string& period) {
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || !(q > 0)) return std::nullopt;  // "max", -1, junk
  const double p = std::strtod(period.c_str(), &end);
  if (end == period.c_str() || !(p > 0)) return std::nullopt;
  return q / p;
}

std::optional<double> QuotaAt(const std::string& dir, bool v2) {
  if (v2) {
    const std::optional<std::string> max = ReadSmall(dir + "/cpu.max");
    if (!max) return std::nullopt;
    std::istringstream fields(*max);
    std::string quota, period;
    fields >> quota >> period;
    return QuotaCpus(quota, period);
  }
  const std::optional<std::string> quota = ReadSmall(dir + "/cpu.cfs_quota_us");
  const std::optional<std::string> period = ReadSmall(dir + "/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  return QuotaCpus(*quota, *period);
}

// The smallest quota from `mount + path` up to `mount`. The path comes from
// /proc/self/cgroup; ".." never walks above the mount.
std::optional<double> SmallestQuota(const std::string& mount, std::string path, bool v2) {
  std::optional<double> smallest;
  for (int depth = 0; depth < 64; ++depth) {
    if (path.find("..") != std::string::npos) break;
    if (const std::optional<double> q = QuotaAt(mount + path, v2))
      smallest = smallest ? std::min(*smallest, *q) : *q;
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return smallest;
}

// The cgroup's CPU quota: v2's unified hierarchy, else v1's cpu controller.
std::optional<double> CgroupQuota(const std::string& proc_self_cgroup,
                                  const std::string& cgroup_root) {
  const std::optional<std::string> text = ReadSmall(proc_self_cgroup, 64 * 1024);
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  std::optional<double> v1;
  while (std::getline(lines, line)) {
    // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      if (std::optional<double> q = SmallestQuota(cgroup_root, path, /*v2=*/true)) return q;
      continue;
    }
    std::istringstream names(controllers);
    std::string name;
    bool cpu = false;
    while (std::getline(names, name, ',')) cpu = cpu || name == "cpu";
    if (!cpu) continue;
    for (const char* mount : {"cpu,cpuacct", "cpuacct,cpu", "cpu"}) {
      if (std::optional<double> q = SmallestQuota(cgroup_root + "/" + mount, path, /*v2=*/false)) {
        v1 = v1 ? std::min(*v1, *q) : *q;
        break;
      }
    }
  }
  return v1;
}

}  // namespace

CpuBudget AvailableCpus(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CpuBudget b;
  b.cpus = cores;
  std::string bound = "the machine's cores";
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int allowed = CPU_COUNT(&set);
    if (allowed > 0 && allowed < b.cpus) {
      b.cpus = allowed;
      bound = "the CPUs this process may run on";
    }
  }
  if (const std::optional<double> quota = CgroupQuota(proc_self_cgroup, cgroup_root)) {
    const int q = static_cast<int>(std::min(std::ceil(*quota), 1e6));
    if (q < b.cpus) {
      b.cpus = std::max(1, q);
      char buf[64];
      std::snprintf(buf, sizeof(buf), "the cgroup's CPU quota of %.2f", *quota);
      bound = buf;
    }
  }
  b.reason = std::to_string(b.cpus) + " (" + bound + "; " + std::to_string(cores) +
             " cores on the machine)";
  return b;
}

}  // namespace quantd
