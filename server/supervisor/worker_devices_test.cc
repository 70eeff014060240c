#include "server/supervisor/worker_devices.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "worker/common/status.h"

namespace quantd::server {
namespace {

using Devices = std::vector<std::string>;

TEST(WorkerDevicesTest, VisibleGpusFromTheEnvironmentOrDeviceNodes) {
  EXPECT_EQ(VisibleGpuDevices("0,1"), (Devices{"cuda:0", "cuda:1"}));
  EXPECT_EQ(VisibleGpuDevices("GPU-8f2c,GPU-11aa,GPU-3"), (Devices{"cuda:0", "cuda:1", "cuda:2"}));
  EXPECT_EQ(VisibleGpuDevices("2,-1,3"), (Devices{"cuda:0"}));  // CUDA stops at -1
  EXPECT_EQ(VisibleGpuDevices(""), Devices{});

  const auto dev = std::filesystem::path(testing::TempDir()) / "dev";
  std::filesystem::create_directories(dev);
  for (const char* n : {"nvidia0", "nvidia3", "nvidiactl", "nvidia-uvm", "null"})
    std::ofstream(dev / n) << "";
  EXPECT_EQ(VisibleGpuDevices(std::nullopt, dev.string()), (Devices{"cuda:0", "cuda:1"}));
  EXPECT_EQ(VisibleGpuDevices(std::nullopt, (dev / "missing").string()), Devices{});
}

TEST(WorkerDevicesTest, PlansWorkersOverDevices) {
  auto cpu = PlanLocalWorkers("cpu", 3, {});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->count, 3);
  EXPECT_EQ(cpu->devices, Devices{"cpu"});

  auto gpus = PlanLocalWorkers("gpus", 0, {"cuda:0", "cuda:1"});
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->count, 2);  // one per GPU
  EXPECT_EQ(gpus->devices, (Devices{"cuda:0", "cuda:1"}));

  auto listed = PlanLocalWorkers("cuda:1,cpu", 4, {});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->count, 4);  // round robin
  EXPECT_EQ(listed->devices, (Devices{"cuda:1", "cpu"}));

  auto none = PlanLocalWorkers("gpus", 0, {});
  EXPECT_EQ(none.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("no GPU is visible"), std::string::npos);

  auto bad = PlanLocalWorkers("cuda:0,gpu1", 0, {});
  EXPECT_EQ(bad.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().ToString().find("gpu1"), std::string::npos);
}

}  // namespace
}  // namespace quantd::server
