// How many CPUs this process may use, for its default intra-op thread
// count. std::thread::hardware_concurrency() counts the machine's cores: in
// a Kubernetes pod with a CPU limit of 4 on a 96-core node it says 96, and
// 96 OpenMP threads then spin and are throttled by the CFS quota. The
// budget is the smaller of the CPUs the scheduler lets the process run on
// (sched_getaffinity: cpusets, taskset) and its cgroup's CPU quota rounded
// up (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, the
// smallest along the path from the process's cgroup to the root), at least
// one.
#ifndef QUANTD_WORKER_COMMON_CPU_BUDGET_H_
#define QUANTD_WORKER_COMMON_CPU_BUDGET_H_

#include <string>

namespace quantd {

struct CpuBudget {
  int cpus = 1;
  // One line for the startup log: the count and what bounded it.
  std::string reason;
};

// `proc_self_cgroup` and `cgroup_root` are /proc/self/cgroup and
// /sys/fs/cgroup, parameters so a test can give its own files. Unreadable
// or malformed files bound nothing.
CpuBudget AvailableCpus(const std::string& proc_self_cgroup = "/proc/self/cgroup",
                        const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_CPU_BUDGET_H_
