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

// Llama-3-8B's shapes (d 4096, f 14336, 32 heads of 128, 8 KV heads).
models::ModelConfig Llama3_8B() {
  models::ModelConfig c;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  return c;
}

TEST(ActivationPlacementTest, WorkingSetFollowsTheFormulaAtLlama3_8BShapes) {
  // By hand: 218,112,000 parameters a block (q, o 4096^2; k, v 4096 x 1024;
  // gate, up, down 4096 x 14336; two norms) x 4 B = 872,448,000 B, twice
  // (this block and the prefetched one); a sub-batch of 8192 tokens x 14336
  // x 4 B x 3 = 1,409,286,144 B; a GPU attention tile of 2^27 scores x 4 B
  // x 2 = 1,073,741,824 B; GPTQ: the float weights again and 4 x 14336^2 x
  // 4 B = 3,288,334,336 B.
  const models::ModelOptions gpu = models::ModelOptions::For(c10::Device(c10::DeviceType::CUDA, 0));
  EXPECT_EQ(BlockWorkingSetBytes(Llama3_8B(), gpu),
            2 * int64_t{872448000} + 1409286144 + 1073741824 + 872448000 + 3288334336);
  // A mixture of experts counts every expert: Mixtral's 8 of 14336 weigh
  // eight dense MLPs, and its widest input is still 14336.
  models::ModelConfig moe = Llama3_8B();
  moe.num_experts = 8;
  moe.num_experts_per_tok = 2;
  const int64_t dense = BlockWorkingSetBytes(Llama3_8B(), gpu);
  const int64_t experts = 7 * int64_t{3} * 4096 * 14336 + 4096 * 8;  // beyond the dense MLP
  EXPECT_EQ(BlockWorkingSetBytes(moe, gpu), dense + 3 * 4 * experts);
  // A tenant's config at every loader bound (dimensions of 2^24, 4096
  // experts) saturates instead of overflowing, and then goes to the host.
  models::ModelConfig huge = moe;
  huge.hidden_size = huge.intermediate_size = huge.moe_intermediate_size = int64_t{1} << 24;
  huge.num_experts = 4096;
  EXPECT_EQ(BlockWorkingSetBytes(huge, gpu), int64_t{1} << 62);
  const DeviceMemory mem{80 * kGiB, 0};
  EXPECT_TRUE(PlaceActivations(ActivationOffload::kAuto, kGiB, int64_t{1} << 62,
                               c10::Device(c10::DeviceType::CUDA, 0), mem)
                  .on_host);
}

TEST(ActivationPlacementTest, AutoKeepsOnTheDeviceWhatFitsBesideTheWorkingSet) {
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  const int64_t working =
      BlockWorkingSetBytes(Llama3_8B(), models::ModelOptions::For(gpu));  // 7.81 GiB
  // The H100 run of docs/performance.md: 512 x 2048 calibration tokens of
  // d 4096 in float32, input and float output (32 GiB), with 60.59 GiB
  // free, went to the host under the old half-the-free-memory rule. Beside
  // the block's working set they need 39.8 GiB, under three quarters of it.
  const int64_t activations = 2 * int64_t{512} * 2048 * 4096 * 4;
  const DeviceMemory h100{int64_t{81559} << 20,
                          (int64_t{81559} << 20) - 62044 * (int64_t{1} << 20)};
  const ActivationPlacement fits =
      PlaceActivations(ActivationOffload::kAuto, activations, working, gpu, h100);
  EXPECT_FALSE(fits.on_host) << fits.reason;
  EXPECT_EQ(fits.reason,
            "activations 32.00 GiB kept on cuda:0: with a block's working set of about 7.81 GiB "
            "they need at most three quarters of the 60.59 GiB free there");
  // The boundary: three quarters of 60 GiB free is 45 GiB.
  const DeviceMemory mem{80 * kGiB, 20 * kGiB};
  EXPECT_FALSE(
      PlaceActivations(ActivationOffload::kAuto, 45 * kGiB - working, working, gpu, mem).on_host);
  const ActivationPlacement big =
      PlaceActivations(ActivationOffload::kAuto, 45 * kGiB - working + 1, working, gpu, mem);
  EXPECT_TRUE(big.on_host);
  EXPECT_NE(big.reason.find("kept in host memory and streamed to cuda:0: with a block's working "
                            "set of about 7.81 GiB they need more than three quarters of the "
                            "60.00 GiB free there"),
            std::string::npos)
      << big.reason;
  // A working set alone past the bound sends even small activations to the host.
  EXPECT_TRUE(PlaceActivations(ActivationOffload::kAuto, kGiB, 45 * kGiB, gpu, mem).on_host);
  // Overrides, and an unknown free memory.
  EXPECT_TRUE(PlaceActivations(ActivationOffload::kHost, 1, working, gpu, mem).on_host);
  EXPECT_FALSE(PlaceActivations(ActivationOffload::kDevice, 100 * kGiB, working, gpu, mem).on_host);
  EXPECT_FALSE(
      PlaceActivations(ActivationOffload::kAuto, 100 * kGiB, working, gpu, std::nullopt).on_host);
  // A CPU job has nothing to move, whatever the mode.
  EXPECT_FALSE(
      PlaceActivations(ActivationOffload::kHost, kGiB, working, at::kCPU, std::nullopt).on_host);
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
