#include "worker/export/serving_target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "worker/config/presets.h"

namespace quantd::exporter {
namespace {

// The Linears of a Llama-shaped model with `blocks` blocks.
std::vector<config::LayerInfo> Llama(int blocks, int64_t hidden, int64_t inter, int64_t kv) {
  std::vector<config::LayerInfo> out;
  for (int b = 0; b < blocks; ++b) {
    const std::string p = "model.layers." + std::to_string(b) + ".";
    out.push_back({p + "self_attn.q_proj", "Linear", hidden, hidden});
    out.push_back({p + "self_attn.k_proj", "Linear", kv, hidden});
    out.push_back({p + "self_attn.v_proj", "Linear", kv, hidden});
    out.push_back({p + "self_attn.o_proj", "Linear", hidden, hidden});
    out.push_back({p + "mlp.gate_proj", "Linear", inter, hidden});
    out.push_back({p + "mlp.up_proj", "Linear", inter, hidden});
    out.push_back({p + "mlp.down_proj", "Linear", hidden, inter});
  }
  out.push_back({"lm_head", "Linear", 32000, hidden});
  return out;
}

std::vector<std::string> Served(const std::vector<config::LayerInfo>& layers,
                                std::optional<int> group_size) {
  std::vector<std::string> out;
  for (const std::string& name : config::PresetNames()) {
    auto c = config::PresetConfig(name, group_size);
    if (!c.ok()) continue;
    if (VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*c, layers)).empty())
      out.push_back(name);
  }
  return out;
}

// The presets whose stories260K exports pass tests/peers/vllm_quark_check.py
// (vllm_quark_peer_test.sh runs each under --target vllm and checks the
// same split on the real exports).
TEST(ServingTargetTest, PresetsVllmServesForStories260K) {
  const auto stories = Llama(5, 64, 172, 64);
  EXPECT_EQ(Served(stories, 4),
            (std::vector<std::string>{"w_fp8_a_fp8", "w_fp8_per_channel_a_fp8_per_token_dynamic",
                                      "w_int8_a_int8_per_tensor_sym",
                                      "w_int8_a_int8_per_token_dynamic",
                                      "w_int8_per_channel_a_int8_per_tensor_sym",
                                      "w_int8_per_tensor_mse", "w_int8_per_tensor_percentile"}));
}

// At Llama-3-8B's shapes the W4A16 and OCP MX presets serve too: every
// width is whole words of 8 codes and whole blocks of 32.
TEST(ServingTargetTest, PresetsVllmServesForLlama8BShapes) {
  const auto llama = Llama(2, 4096, 14336, 1024);
  const std::vector<std::string> served = Served(llama, std::nullopt);
  for (const char* name : {"w_int4_per_group_sym", "w_uint4_per_group_asym", "w_mxfp4_a_mxfp4",
                           "w_mxfp6_e2m3_a_mxfp6_e2m3", "w_fp8_a_fp8"})
    EXPECT_NE(std::find(served.begin(), served.end(), name), served.end()) << name;
  for (const char* name : {"w_int4_per_group_asym", "w_uint4_per_group_sym", "w_mxfp4",
                           "w_mxfp8_a_mxfp8", "w_int8_per_channel_sym", "w_bf16",
                           "w_fp8_a_fp8_o_fp8", "w_int4_per_channel_sym"})
    EXPECT_EQ(std::find(served.begin(), served.end(), name), served.end()) << name;
}

// Phi-3's projections fused on disk, as vLLM loads them
// (tests/peers/vllm_quark_check.py follows it): FP8 per-tensor scales are
// fine, int8 per-tensor ones leave shards uninitialized, in both formats
// (vllm_ct_check.py follows the compressed_tensors side).
TEST(ServingTargetTest, LinearsFusedOnDiskAsVllmLoadsThem) {
  std::vector<config::LayerInfo> phi3;
  for (int b = 0; b < 2; ++b) {
    const std::string p = "model.layers." + std::to_string(b) + ".";
    phi3.push_back({p + "self_attn.qkv_proj", "Linear", 4096 + 2 * 1024, 4096});
    phi3.push_back({p + "self_attn.o_proj", "Linear", 4096, 4096});
    phi3.push_back({p + "mlp.gate_up_proj", "Linear", 2 * 14336, 4096});
    phi3.push_back({p + "mlp.down_proj", "Linear", 4096, 14336});
  }
  auto fp8 = config::PresetConfig("w_fp8_a_fp8", std::nullopt);
  ASSERT_TRUE(fp8.ok());
  EXPECT_TRUE(VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*fp8, phi3)).empty());
  EXPECT_TRUE(VllmRefusals(ExportFormat::kCompressedTensors, ServedLinearsOf(*fp8, phi3)).empty());
  auto int8 = config::PresetConfig("w_int8_a_int8_per_tensor_sym", std::nullopt);
  ASSERT_TRUE(int8.ok());
  const auto refusals = VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*int8, phi3));
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_NE(refusals[0].find("model.layers.0.self_attn.qkv_proj (and 3 more): vLLM loads the "
                             "one per_tensor int8 weight_scale"),
            std::string::npos)
      << refusals[0];
  const auto ct = VllmRefusals(ExportFormat::kCompressedTensors, ServedLinearsOf(*int8, phi3));
  ASSERT_EQ(ct.size(), 1u);
  EXPECT_NE(ct[0].find("uninitialized (CompressedTensorsW8A8Int8)"), std::string::npos) << ct[0];
  int8->exclude = {"re:.*qkv_proj", "re:.*gate_up_proj"};
  EXPECT_TRUE(VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*int8, phi3)).empty());
}

TEST(ServingTargetTest, RefusalsNameTheFirstLayerAndCountTheRest) {
  auto c = config::PresetConfig("w_int4_per_group_asym", 4);
  ASSERT_TRUE(c.ok());
  const auto refusals = VllmRefusals(ExportFormat::kHfQuark,
                                     ServedLinearsOf(*c, Llama(5, 64, 172, 64)));
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0],
            "model.layers.0.self_attn.q_proj (and 34 more): vLLM decodes int4 by `symmetric` "
            "alone, so asymmetric int4 would decode wrong: use uint4 asymmetric "
            "(w_uint4_per_group_asym) or int4 symmetric");
}

TEST(ServingTargetTest, ShapesVllmCannotHold) {
  auto mx = config::PresetConfig("w_mxfp4_a_mxfp4");
  ASSERT_TRUE(mx.ok());
  EXPECT_EQ(VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*mx, Llama(1, 64, 172, 64))),
            (std::vector<std::string>{
                "model.layers.0.mlp.down_proj: in_features 172 is not a multiple of 32 (vLLM "
                "allocates one scale per whole block of 32)"}));
  auto w4 = config::PresetConfig("w_int4_per_group_sym", 4);
  ASSERT_TRUE(w4.ok());
  EXPECT_EQ(VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*w4, Llama(1, 64, 172, 64))),
            (std::vector<std::string>{
                "model.layers.0.mlp.gate_proj (and 1 more): out_features 172 is not a multiple "
                "of 8 (vLLM packs 8 codes per int32 word along the outputs)"}));
}

TEST(ServingTargetTest, FusedShardsMustAgree) {
  auto c = config::PresetConfig("w_fp8_a_fp8");
  ASSERT_TRUE(c.ok());
  c->exclude.push_back("*k_proj");
  EXPECT_EQ(VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*c, Llama(2, 64, 172, 64))),
            (std::vector<std::string>{
                "model.layers.0.self_attn.q_proj (and 1 more): q_proj, k_proj, v_proj must be "
                "excluded together and quantized alike: vLLM loads them as one qkv_proj"}));
  c->exclude.push_back("*q_proj");
  c->exclude.push_back("*v_proj");
  EXPECT_TRUE(
      VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*c, Llama(2, 64, 172, 64))).empty());
}

TEST(ServingTargetTest, KvCacheIsTheOneOutputVllmTakes) {
  auto c = config::PresetConfig("w_fp8_a_fp8");
  ASSERT_TRUE(c.ok());
  config::AddFp8KvCache(*c);
  const auto served = ServedLinearsOf(*c, Llama(1, 64, 172, 64));
  EXPECT_TRUE(served[1].kv_cache_output);  // k_proj
  EXPECT_FALSE(served[0].kv_cache_output);
  EXPECT_TRUE(VllmRefusals(ExportFormat::kHfQuark, served).empty());
  EXPECT_EQ(ArtifactConsumers(ExportFormat::kHfQuark, served), std::vector<std::string>{"vllm"});

  auto o = config::PresetConfig("w_fp8_a_fp8_o_fp8");
  ASSERT_TRUE(o.ok());
  const auto refused = VllmRefusals(ExportFormat::kHfQuark, ServedLinearsOf(*o, Llama(1, 64, 172, 64)));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("no kernel for quantized Linear outputs"), std::string::npos);
  EXPECT_TRUE(ArtifactConsumers(ExportFormat::kHfQuark, ServedLinearsOf(*o, Llama(1, 64, 172, 64)))
                  .empty());
}

TEST(ServingTargetTest, OtherFormatsNameTheirConsumer) {
  EXPECT_EQ(VllmRefusals(ExportFormat::kGguf, {}),
            std::vector<std::string>{"vLLM serves hf_quark and compressed_tensors exports; gguf is for llama.cpp"});
  EXPECT_EQ(ArtifactConsumers(ExportFormat::kGguf, {}), std::vector<std::string>{"llama.cpp"});
  EXPECT_EQ(ArtifactConsumers(ExportFormat::kOnnxQdq, {}),
            std::vector<std::string>{"onnxruntime"});
  EXPECT_TRUE(ArtifactConsumers(ExportFormat::kHfFakeQuantized, {}).empty());
}

}  // namespace
}  // namespace quantd::exporter
