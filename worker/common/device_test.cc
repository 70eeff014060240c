#include "worker/common/device.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

namespace quantd {
namespace {

TEST(DeviceTest, CpuAndMalformedNames) {
  auto cpu = ParseEngineDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(cpu->is_cpu());
  EXPECT_EQ(DeviceName(*cpu), "cpu");
  EXPECT_FALSE(QueryDeviceMemory(*cpu).has_value());

  for (const char* bad : {"gpu", "cuda:x", "", "mps"}) {
    auto d = ParseEngineDevice(bad, "--device");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    ASSERT_EQ(d.status().violations().size(), 1u);
    EXPECT_EQ(d.status().violations()[0].field, "--device");
  }
}

// On a CPU-only LibTorch a GPU is a failed precondition naming the build; on
// a GPU host cuda:0 parses and its memory is readable.
TEST(DeviceTest, CudaFollowsTheBuildAndHost) {
  auto d = ParseEngineDevice("cuda");
  if (!at::hasCUDA()) {
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(d.status().message().find("CPU-only"), std::string::npos);
    return;
  }
  if (at::getNumGPUs() == 0) {
    EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
    return;
  }
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(DeviceName(*d), "cuda:0");
  auto m = QueryDeviceMemory(*d);
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->total_bytes, int64_t{1} << 30);
  EXPECT_LE(m->used_bytes, m->total_bytes);
  auto far = ParseEngineDevice("cuda:" + std::to_string(at::getNumGPUs()));
  EXPECT_EQ(far.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace quantd
