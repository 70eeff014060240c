#include "worker/config/presets.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace quantd::config {
namespace {

using quant::DataType;
using quant::ObserverType;
using quant::QScheme;

QuantConfig Preset(const std::string& name, std::optional<int> group = {}) {
  auto c = PresetConfig(name, group);
  EXPECT_TRUE(c.ok()) << name << ": " << c.status();
  return c.ok() ? *c : QuantConfig();
}

TEST(PresetsTest, EveryPresetIsValidAndLeavesLmHeadInFloat) {
  const std::vector<std::string> required = {"w_int4_per_channel_sym",
                                             "w_uint4_per_channel_asym",
                                             "w_int4_per_group_sym",
                                             "w_uint4_per_group_asym",
                                             "w_int8_per_tensor_sym",
                                             "w_int8_per_channel_sym",
                                             "w_int8_a_int8_per_tensor_sym",
                                             "w_int8_a_int8_per_tensor_sym_dynamic",
                                             "w_int8_a_int8_per_token_dynamic",
                                             "w_fp8_a_fp8",
                                             "w_fp8_a_fp8_o_fp8",
                                             "w_fp8_per_channel_a_fp8_per_token_dynamic",
                                             "w_mxfp4_a_mxfp4",
                                             "w_mxfp4_a_mxfp6_e2m3",
                                             "w_mxfp6_e3m2_a_mxfp6_e3m2",
                                             "w_mxfp8_a_mxfp8",
                                             "w_mxint8_a_mxint8",
                                             "w_bf16",
                                             "w_fp16",
                                             "w_int8_per_tensor_percentile",
                                             "w_int8_per_tensor_mse",
                                             "w_uint8_per_tensor_percentile",
                                             "w_uint8_per_tensor_mse"};
  const std::vector<std::string> names = PresetNames();
  for (const std::string& r : required) {
    EXPECT_NE(std::find(names.begin(), names.end(), r), names.end()) << r;
  }
  for (const std::string& name : names) {
    const QuantConfig c = Preset(name);
    EXPECT_TRUE(ValidateConfig(c).ok()) << name << ": " << ValidateConfig(c);
    EXPECT_EQ(c.exclude, std::vector<std::string>{"lm_head"}) << name;
    EXPECT_TRUE(c.global_quant_config.weight.has_value()) << name;
    EXPECT_NE(DescribePreset(name), "unknown scheme");
  }
}

TEST(PresetsTest, MeaningsFollowTheReference) {
  QuantConfig c = Preset("w_int4_per_group_sym");
  const QuantSpec& w = *c.global_quant_config.weight;
  EXPECT_EQ(w.dtype, DataType::kInt4);
  EXPECT_EQ(w.qscheme, QScheme::kPerGroup);
  EXPECT_EQ(w.group_size, 128);
  EXPECT_EQ(w.ch_axis, 1);
  EXPECT_TRUE(w.symmetric);
  EXPECT_FALSE(w.is_dynamic);
  EXPECT_FALSE(c.global_quant_config.input_tensors.has_value());
  EXPECT_EQ(Preset("w_int4_per_group_sym", 32).global_quant_config.weight->group_size, 32);
  EXPECT_FALSE(Preset("w_uint4_per_group_asym").global_quant_config.weight->symmetric);

  c = Preset("w_int8_a_int8_per_token_dynamic");
  EXPECT_EQ(c.global_quant_config.weight->qscheme, QScheme::kPerChannel);
  EXPECT_EQ(c.global_quant_config.weight->ch_axis, 0);
  const QuantSpec& a = *c.global_quant_config.input_tensors;
  EXPECT_EQ(a.qscheme, QScheme::kPerChannel);
  EXPECT_EQ(a.ch_axis, 1);
  EXPECT_TRUE(a.is_dynamic);

  c = Preset("w_int8_a_int8_per_tensor_sym_dynamic");
  EXPECT_TRUE(c.global_quant_config.input_tensors->is_dynamic);

  c = Preset("w_fp8_a_fp8_o_fp8");
  EXPECT_EQ(c.global_quant_config.output_tensors->dtype, DataType::kFp8E4M3);
  EXPECT_FALSE(c.global_quant_config.input_tensors->is_dynamic);

  c = Preset("w_fp8_per_channel_a_fp8_per_token_dynamic");
  EXPECT_EQ(c.global_quant_config.weight->qscheme, QScheme::kPerChannel);
  EXPECT_TRUE(c.global_quant_config.input_tensors->is_dynamic);

  c = Preset("w_mxfp4_a_mxfp6_e2m3");
  EXPECT_EQ(c.global_quant_config.weight->dtype, DataType::kMxFp4);
  EXPECT_FALSE(c.global_quant_config.weight->is_dynamic);
  EXPECT_EQ(c.global_quant_config.input_tensors->dtype, DataType::kMxFp6E2M3);
  EXPECT_TRUE(c.global_quant_config.input_tensors->is_dynamic);
  EXPECT_EQ(c.global_quant_config.input_tensors->mx_scale_mode, quant::MxScaleMode::kEven);

  c = Preset("w_int8_per_tensor_mse");
  EXPECT_EQ(c.global_quant_config.weight->observer, ObserverType::kMse);
  EXPECT_EQ(c.global_quant_config.input_tensors->observer, ObserverType::kMinMax);

  EXPECT_EQ(Preset("w_bf16").global_quant_config.weight->dtype, DataType::kBFloat16);
  EXPECT_EQ(DescribePreset("w_int4_per_group_sym"), "weights int4 per_group(128) sym; inputs -");
}

TEST(PresetsTest, UnknownNamesAndGroupSizesAreViolations) {
  auto unknown = PresetConfig("w_int5_per_group", {}, "spec.quantization.scheme");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().reason(), "INVALID_QUANT_CONFIG");
  ASSERT_EQ(unknown.status().violations().size(), 1u);
  EXPECT_EQ(unknown.status().violations()[0].field, "spec.quantization.scheme");
  EXPECT_NE(unknown.status().violations()[0].description.find("w_int4_per_group_sym"),
            std::string::npos);

  auto mx = PresetConfig("w_mxfp4_a_mxfp4", 64);
  ASSERT_FALSE(mx.ok());
  EXPECT_EQ(mx.status().violations()[0].field, "group_size");
  EXPECT_TRUE(PresetConfig("w_mxfp4_a_mxfp4", 32).ok());

  auto negative = PresetConfig("w_int4_per_group_sym", -5);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().violations()[0].field, "group_size");
}

TEST(PresetsTest, Fp8KvCacheCarriesTheGlobalConfig) {
  QuantConfig c = Preset("w_int4_per_group_sym");
  AddFp8KvCache(c);
  AddFp8KvCache(c);  // idempotent
  ASSERT_EQ(c.kv_cache_quant_config.size(), 2u);
  EXPECT_EQ(c.kv_cache_quant_config[0].pattern, "*k_proj");
  EXPECT_EQ(c.kv_cache_quant_config[1].pattern, "*v_proj");
  const LayerQuantConfig& kv = c.kv_cache_quant_config[0].config;
  EXPECT_EQ(kv.weight, c.global_quant_config.weight);
  ASSERT_TRUE(kv.output_tensors.has_value());
  EXPECT_EQ(kv.output_tensors->dtype, DataType::kFp8E4M3);
  EXPECT_EQ(kv.output_tensors->qscheme, QScheme::kPerTensor);
  EXPECT_FALSE(kv.output_tensors->is_dynamic);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

}  // namespace
}  // namespace quantd::config
