// Where activations live (the auto rule and its overrides), and the
// streamed forward: a block given hidden states in host memory returns the
// same values as one given them on its device. On QUANTD_TEST_DEVICE
// (tools/gpu_check.sh sets cuda:0) that is the real offload path; on cpu
// both calls take the same path.
#include "worker/pipeline/activation_placement.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "worker/models/registry.h"

namespace quantd::pipeline {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

at::Device TestDevice() {
  const char* d = std::getenv("QUANTD_TEST_DEVICE");
  return at::Device(d != nullptr && *d != '\0' ? d : "cpu");
}

TEST(ActivationPlacementTest, ParsesTheThreeModesAndNamesABadOne) {
  EXPECT_EQ(*ParseActivationOffload("auto"), ActivationOffload::kAuto);
  EXPECT_EQ(*ParseActivationOffload("host"), ActivationOffload::kHost);
  EXPECT_EQ(*ParseActivationOffload("device"), ActivationOffload::kDevice);
  auto bad = ParseActivationOffload("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'gpu'"), std::string::npos);
  for (auto m : {ActivationOffload::kAuto, ActivationOffload::kHost, ActivationOffload::kDevice})
    EXPECT_EQ(*ParseActivationOffload(ActivationOffloadName(m)), m);
}

TEST(ActivationPlacementTest, AutoOffloadsWhatNeedsMoreThanHalfTheFreeMemory) {
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  const DeviceMemory mem{80 * kGiB, 20 * kGiB};  // 60 GiB free
  EXPECT_FALSE(PlaceActivations(ActivationOffload::kAuto, 30 * kGiB, gpu, mem).on_host);
  const ActivationPlacement big = PlaceActivations(ActivationOffload::kAuto, 31 * kGiB, gpu, mem);
  EXPECT_TRUE(big.on_host);
  EXPECT_NE(big.reason.find("31.00 GiB kept in host memory and streamed to cuda:0"),
            std::string::npos)
      << big.reason;
  EXPECT_NE(big.reason.find("60.00 GiB free"), std::string::npos) << big.reason;
  // Overrides, and an unknown free memory.
  EXPECT_TRUE(PlaceActivations(ActivationOffload::kHost, 1, gpu, mem).on_host);
  EXPECT_FALSE(PlaceActivations(ActivationOffload::kDevice, 100 * kGiB, gpu, mem).on_host);
  EXPECT_FALSE(PlaceActivations(ActivationOffload::kAuto, 100 * kGiB, gpu, std::nullopt).on_host);
  // A CPU job has nothing to move, whatever the mode.
  EXPECT_FALSE(PlaceActivations(ActivationOffload::kHost, kGiB, at::kCPU, std::nullopt).on_host);
}

TEST(ActivationPlacementTest, ToHostKeepsHostTensorsAndCopiesDeviceOnes) {
  const at::Tensor cpu = at::randn({3, 4});
  EXPECT_TRUE(ToHost(cpu).is_same(cpu));
  const at::Device device = TestDevice();
  if (device.is_cpu()) return;
  const at::Tensor host = ToHost(cpu.to(device));
  EXPECT_TRUE(host.device().is_cpu());
  EXPECT_TRUE(host.is_pinned());
  EXPECT_TRUE(at::equal(host, cpu));
}

TEST(ActivationPlacementTest, StreamedBlockForwardEqualsTheResidentOne) {
  models::ModelOptions options;
  options.device = TestDevice();
  options.max_tokens_per_chunk = 64;  // several sub-batches
  auto model = models::OpenCausalLM("models/stories260K", options);
  ASSERT_TRUE(model.ok()) << model.status();
  at::manual_seed(5);
  const at::Tensor ids = at::randint(1, 512, {6, 32}, at::kLong);
  auto hidden = (*model)->Embed(ids);
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  auto block = (*model)->LoadBlock(2);
  ASSERT_TRUE(block.ok()) << block.status();
  auto resident = (*block)->Forward(*hidden);
  auto streamed = (*block)->Forward(ToHost(*hidden));
  ASSERT_TRUE(resident.ok()) << resident.status();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(resident->device(), options.device);
  EXPECT_TRUE(streamed->device().is_cpu());
  EXPECT_TRUE(at::equal(streamed->cpu(), resident->cpu()));
  EXPECT_GT(resident->abs().sum().item<double>(), 0);

  // In place, streamed: each sub-batch's output goes back over its input in
  // host memory.
  const at::Tensor host = ToHost(*hidden);
  auto in_place = (*block)->ForwardInPlace(host);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_EQ(in_place->data_ptr(), host.data_ptr());
  EXPECT_TRUE(at::equal(in_place->cpu(), resident->cpu()));
}

}  // namespace
}  // namespace quantd::pipeline
