#include "worker/common/cpu_budget.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace quantd {
namespace {

namespace fs = std::filesystem;

// A fake /proc/self/cgroup and /sys/fs/cgroup under the test's temp dir.
class CpuBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_ / "cgroup");
  }
  void Write(const std::string& relative, const std::string& text) {
    const fs::path p = root_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  CpuBudget Budget() {
    return AvailableCpus((root_ / "proc_self_cgroup").string(), (root_ / "cgroup").string());
  }
  // What bounds a process with no quota: its affinity (or the cores).
  static int Unbounded() { return AvailableCpus("/nonexistent", "/nonexistent").cpus; }

  fs::path root_;
};

TEST_F(CpuBudgetTest, CgroupV2QuotaBoundsTheThreads) {
  // A pod limited to half a CPU: one thread, whatever the machine.
  Write("proc_self_cgroup", "0::/kubepods/pod1/c1\n");
  Write("cgroup/kubepods/pod1/c1/cpu.max", "50000 100000\n");
  Write("cgroup/kubepods/cpu.max", "max 100000\n");
  const CpuBudget b = Budget();
  EXPECT_EQ(b.cpus, 1);
  if (Unbounded() > 1) {
    EXPECT_NE(b.reason.find("the cgroup's CPU quota of 0.50"), std::string::npos) << b.reason;
  }
}

TEST_F(CpuBudgetTest, TheSmallestQuotaOnThePathToTheRootWins) {
  Write("proc_self_cgroup", "0::/kubepods/pod1/c1\n");
  Write("cgroup/kubepods/pod1/c1/cpu.max", "300000 100000\n");
  Write("cgroup/kubepods/pod1/cpu.max", "max 100000\n");
  Write("cgroup/kubepods/cpu.max", "100000 100000\n");
  EXPECT_EQ(Budget().cpus, 1);
}

TEST_F(CpuBudgetTest, CgroupV1CfsQuotaBoundsTheThreads) {
  Write("proc_self_cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n");
  Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "100000\n");
  Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(Budget().cpus, 1);
  // -1 is no quota.
  Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(Budget().cpus, Unbounded());
}

TEST_F(CpuBudgetTest, NoQuotaOrBadFilesBoundNothing) {
  Write("proc_self_cgroup", "0::/\n");
  Write("cgroup/cpu.max", "max 100000\n");
  EXPECT_EQ(Budget().cpus, Unbounded());
  for (const char* bad : {"junk", "0 100000", "100000 0", "-5 100000", "nan 100000", ""}) {
    Write("cgroup/cpu.max", bad);
    EXPECT_EQ(Budget().cpus, Unbounded()) << bad;
  }
  // Lines without the three fields, and a path that climbs out of the mount.
  Write("cgroup/cpu.max", "max 100000\n");
  Write("outside/cpu.max", "50000 100000\n");
  Write("proc_self_cgroup", "garbage\n::\n0::/../outside\n");
  EXPECT_EQ(Budget().cpus, Unbounded());
  // A missing /proc/self/cgroup.
  EXPECT_EQ(AvailableCpus((root_ / "none").string(), (root_ / "cgroup").string()).cpus,
            Unbounded());
}

TEST_F(CpuBudgetTest, ThisProcessHasAtLeastOneAndAtMostTheCores) {
  const CpuBudget b = AvailableCpus();
  EXPECT_GE(b.cpus, 1);
  EXPECT_LE(b.cpus, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_NE(b.reason.find("cores on the machine"), std::string::npos) << b.reason;
}

}  // namespace
}  // namespace quantd
