#include "worker/common/torch_compat.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace quantd::torch_compat {
namespace {

TEST(TorchCompatTest, VersionMacrosMatchTheVersionString) {
  const std::string expected = std::to_string(QUANTD_TORCH_VERSION_MAJOR) + "." +
                               std::to_string(QUANTD_TORCH_VERSION_MINOR) + ".";
  EXPECT_EQ(TorchVersion().rfind(expected, 0), 0u) << TorchVersion();
  EXPECT_TRUE(QUANTD_TORCH_AT_LEAST(1, 13));
  EXPECT_TRUE(QUANTD_TORCH_AT_LEAST(QUANTD_TORCH_VERSION_MAJOR, QUANTD_TORCH_VERSION_MINOR));
  EXPECT_FALSE(QUANTD_TORCH_AT_LEAST(QUANTD_TORCH_VERSION_MAJOR, QUANTD_TORCH_VERSION_MINOR + 1));
  EXPECT_FALSE(QUANTD_TORCH_AT_LEAST(QUANTD_TORCH_VERSION_MAJOR + 1, 0));
}

TEST(TorchCompatTest, DataPointersReadAndWriteTheSameStorage) {
  at::Tensor t = at::zeros({2, 3}, at::kFloat);
  float* w = MutableDataPtr<float>(t);
  for (int i = 0; i < 6; ++i) w[i] = 0.5f * static_cast<float>(i) - 1.0f;
  const at::Tensor& ct = t;
  const float* r = ConstDataPtr<float>(ct);
  EXPECT_EQ(static_cast<const void*>(r), static_cast<const void*>(w));
  EXPECT_EQ(r[0], -1.0f);
  EXPECT_EQ(r[5], 1.5f);
  EXPECT_EQ(t.index({1, 2}).item<float>(), 1.5f);
  at::Tensor i32 = at::arange(4, at::kInt);
  EXPECT_EQ(ConstDataPtr<int32_t>(i32)[3], 3);
}

TEST(TorchCompatTest, Float8DtypesExistFromTwoPointOne) {
  const bool expect = QUANTD_TORCH_AT_LEAST(2, 1);
  ASSERT_EQ(Float8E4M3FnType().has_value(), expect);
  ASSERT_EQ(Float8E5M2Type().has_value(), expect);
  if (expect) {
    EXPECT_EQ(c10::elementSize(*Float8E4M3FnType()), 1u);
    EXPECT_EQ(c10::elementSize(*Float8E5M2Type()), 1u);
    EXPECT_NE(*Float8E4M3FnType(), *Float8E5M2Type());
  }
}

TEST(TorchCompatTest, OptionalAliasIsAcceptedByATen) {
  TorchOptional<at::ScalarType> dtype = at::kDouble;
  at::Tensor s = at::sum(at::ones({4}, at::kFloat), dtype);
  EXPECT_EQ(s.scalar_type(), at::kDouble);
  EXPECT_EQ(s.item<double>(), 4.0);
}

TEST(TorchCompatTest, DeviceAvailability) {
  EXPECT_TRUE(DeviceTypeAvailable(c10::DeviceType::CPU));
  EXPECT_EQ(DeviceTypeAvailable(c10::DeviceType::CUDA), at::hasCUDA());
  EXPECT_FALSE(DeviceTypeAvailable(c10::DeviceType::MPS));
}

// On CPU there is nothing to report. On QUANTD_TEST_DEVICE (tools/gpu_check.sh
// sets cuda:0) with LibTorch 2.9 or later, a 256 MiB tensor shows in the
// live and held peaks, and a reset after freeing it starts them over.
TEST(TorchCompatTest, AllocatorStatsFollowAllocationsOnTheTestDevice) {
  EXPECT_FALSE(DeviceAllocatorStats(c10::Device("cpu")).has_value());
  ResetAllocatorPeaks(c10::Device("cpu"));  // a no-op, not an error
  const char* name = std::getenv("QUANTD_TEST_DEVICE");
  if (name == nullptr || std::string(name).rfind("cuda", 0) != 0) return;
  const c10::Device device(name);
  constexpr int64_t kBytes = int64_t{256} << 20;
  {
    at::Tensor t = at::ones({kBytes / 4}, at::TensorOptions().dtype(at::kFloat).device(device));
    auto s = DeviceAllocatorStats(device);
    if (!QUANTD_TORCH_HAS_DEVICE_ALLOCATOR) {
      EXPECT_FALSE(s.has_value()) << "LibTorch " << TorchVersion();
      return;
    }
    ASSERT_TRUE(s.has_value());
    EXPECT_GE(s->allocated, kBytes);
    EXPECT_GE(s->peak_allocated, kBytes);
    EXPECT_GE(s->reserved, s->allocated);
    EXPECT_GE(s->peak_reserved, s->peak_allocated);
  }
  const auto before = DeviceAllocatorStats(device);
  ASSERT_TRUE(before.has_value());
  ResetAllocatorPeaks(device);
  const auto after = DeviceAllocatorStats(device);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->peak_allocated, after->allocated);
  EXPECT_LE(after->peak_allocated + kBytes, before->peak_allocated);
}

}  // namespace
}  // namespace quantd::torch_compat
