// compressed-tensors export of the real stories260K model: the stored
// tensors decode, as the library's dequantize computes ((q - zp) * scale
// with the codes unpacked from weight_packed), to exactly the fake-quantized
// weights; names, dtypes and shapes are the ones vLLM's schemes allocate;
// what vLLM cannot load is refused naming the layer. The export reads back
// (ct_import.h) to the same values and parameters; a damaged or foreign
// checkpoint is refused naming what is wrong.
#include "worker/export/compressed_tensors/ct_export.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gtest/gtest.h"
#include "worker/export/compressed_tensors/ct_import.h"
#include "worker/export/compressed_tensors/ct_packing.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/testing/in_memory_quantized_model.h"
#include "worker/io/safetensors/safetensors_source.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

constexpr char kModel[] = "models/stories260K";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

QuantSpec Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {},
               bool symmetric = true) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  if (q == QScheme::kPerChannel) s.ch_axis = 0;
  if (q == QScheme::kPerGroup) s.ch_axis = 1;
  return s;
}

std::string ConfigJson(const QuarkLayerSpecs& global, const std::vector<std::string>& exclude,
                       std::optional<QuantSpec> kv = {}) {
  json cfg = {{"quant_method", "quark"},
              {"global_quant_config", QuarkLayerJson(global)},
              {"layer_type_quant_config", json::object()},
              {"layer_quant_config", json::object()},
              {"exclude", exclude}};
  if (kv) {
    QuarkLayerSpecs k = global;
    k.output = kv;
    cfg["layer_quant_config"]["*k_proj"] = QuarkLayerJson(k);
    cfg["layer_quant_config"]["*v_proj"] = QuarkLayerJson(k);
  }
  return cfg.dump();
}

class CtExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::path(::testing::TempDir()) / "ct_export";
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }

  StatusOr<std::unique_ptr<testing::InMemoryQuantizedModel>> Quantize(const std::string& config) {
    testing::InMemoryQuantizeOptions qo;
    qo.model_dir = kModel;
    qo.quant_config_json = config;
    at::manual_seed(3);
    qo.calibration_ids = at::randint(3, 512, {2, 48}, at::kLong);
    return testing::InMemoryQuantizedModel::Create(qo);
  }
  StatusOr<Artifact> Export(const QuantizedModel& model) {
    CompressedTensorsExportOptions o;
    o.output_dir = out_.string();
    return ExportCompressedTensors(model, o);
  }
  json QuantConfig() {
    return json::parse(ReadFile((out_ / "config.json").string()))["quantization_config"];
  }
  fs::path out_;
};

TEST_F(CtExportTest, Uint4AsymmetricGroupsDecodeToTheFakeQuantizedWeights) {
  QuarkLayerSpecs g;
  g.weight = Spec(DataType::kUInt4, QScheme::kPerGroup, 32, /*symmetric=*/false);
  // The MLP's 172-wide axes are no whole number of 8-code words (inputs of
  // down_proj, zero points of gate_proj / up_proj): left in float.
  auto model = Quantize(ConfigJson(g, {"lm_head", "*down_proj", "*gate_proj", "*up_proj"}));
  ASSERT_TRUE(model.ok()) << model.status();
  auto art = Export(**model);
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->format, ExportFormat::kCompressedTensors);

  const json qc = QuantConfig();
  EXPECT_EQ(qc["format"], "pack-quantized");
  EXPECT_EQ(qc["config_groups"]["group_0"]["weights"]["symmetric"], false);
  EXPECT_EQ(qc["ignore"].size(), 16u);  // 5 x 3 MLP Linears and the tied lm_head
  EXPECT_NE(std::find(qc["ignore"].begin(), qc["ignore"].end(), "model.layers.4.mlp.up_proj"),
            qc["ignore"].end());
  EXPECT_EQ(qc["ignore"].back(), "lm_head");

  auto st = io::SafetensorsSource::Open(out_.string());
  ASSERT_TRUE(st.ok()) << st.status();
  int checked = 0;
  for (const QuantizedLayer& layer : (*model)->layers()) {
    if (!layer.weight) continue;
    SCOPED_TRACE(layer.name);
    const io::TensorInfo* packed_info = (*st)->Find(layer.name + ".weight_packed");
    ASSERT_NE(packed_info, nullptr);
    EXPECT_EQ(packed_info->dtype, "I32");
    EXPECT_EQ((*st)->Find(layer.name + ".weight"), nullptr);
    auto want = (*model)->Load(layer.name + ".weight");
    ASSERT_TRUE(want.ok());
    const int64_t out = want->size(0), in = want->size(1);
    EXPECT_EQ(packed_info->shape, (std::vector<int64_t>{out, in / 8}));
    at::Tensor shape = *(*st)->LoadStored(layer.name + ".weight_shape");
    EXPECT_EQ(shape.scalar_type(), at::kLong);
    EXPECT_EQ(std::vector<int64_t>(shape.data_ptr<int64_t>(), shape.data_ptr<int64_t>() + 2),
              (std::vector<int64_t>{out, in}));
    at::Tensor scale = *(*st)->LoadStored(layer.name + ".weight_scale");
    EXPECT_EQ(scale.sizes().vec(), (std::vector<int64_t>{out, in / 32}));
    at::Tensor zp_words = *(*st)->LoadStored(layer.name + ".weight_zero_point");
    EXPECT_EQ(zp_words.sizes().vec(), (std::vector<int64_t>{out / 8, in / 32}));
    auto q = UnpackCtInt32(*(*st)->LoadStored(layer.name + ".weight_packed"), 4, in);
    auto zp = UnpackCtInt32(zp_words, 4, out, /*packed_dim=*/0);
    ASSERT_TRUE(q.ok() && zp.ok());
    // The library's dequantize: (q - zp) * scale, group g = column / 32.
    const at::Tensor diff =
        q->to(at::kFloat).reshape({out, in / 32, 32}) - zp->to(at::kFloat).unsqueeze(-1);
    const at::Tensor got = (diff * scale.unsqueeze(-1)).reshape({out, in});
    EXPECT_TRUE(at::equal(got, *want));
    ++checked;
  }
  EXPECT_EQ(checked, 5 * 4);
}

TEST_F(CtExportTest, Fp8W8A8WithKvCacheWritesTheSchemesTensors) {
  QuarkLayerSpecs g;
  g.weight = Spec(DataType::kFp8E4M3);
  g.input = Spec(DataType::kFp8E4M3);
  auto model = Quantize(ConfigJson(g, {"lm_head"}, Spec(DataType::kFp8E4M3)));
  ASSERT_TRUE(model.ok()) << model.status();
  auto art = Export(**model);
  ASSERT_TRUE(art.ok()) << art.status();
  const json qc = QuantConfig();
  EXPECT_EQ(qc["format"], "float-quantized");
  EXPECT_EQ(qc["kv_cache_scheme"]["type"], "float");
  EXPECT_EQ(qc["config_groups"]["group_0"]["input_activations"]["strategy"], "tensor");
  auto st = io::SafetensorsSource::Open(out_.string());
  ASSERT_TRUE(st.ok()) << st.status();
  const std::string m = "model.layers.2.self_attn.k_proj";
  EXPECT_EQ((*st)->Find(m + ".weight")->dtype, "F8_E4M3");
  EXPECT_EQ((*st)->Find(m + ".weight_scale")->shape, (std::vector<int64_t>{1}));
  EXPECT_EQ((*st)->Find(m + ".input_scale")->shape, (std::vector<int64_t>{1}));
  EXPECT_EQ((*st)->Find(m + ".output_scale"), nullptr);
  const io::TensorInfo* k = (*st)->Find("model.layers.2.self_attn.k_scale");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->dtype, "F32");
  const QuantizedLayer* layer = (*model)->FindLayer(m);
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ((*st)->LoadStored("model.layers.2.self_attn.k_scale")->item<float>(),
            layer->output->static_qparams->scale.item<float>());
  EXPECT_NE((*st)->Find("model.layers.2.self_attn.v_scale"), nullptr);
}

TEST_F(CtExportTest, Int8W8A8WithAsymmetricUint8InputsShiftsTheZeroPoint) {
  QuarkLayerSpecs g;
  g.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  g.input = Spec(DataType::kUInt8, QScheme::kPerTensor, {}, /*symmetric=*/false);
  auto model = Quantize(ConfigJson(g, {"lm_head"}));
  ASSERT_TRUE(model.ok()) << model.status();
  auto art = Export(**model);
  ASSERT_TRUE(art.ok()) << art.status();
  const json qc = QuantConfig();
  EXPECT_EQ(qc["format"], "int-quantized");
  EXPECT_EQ(qc["config_groups"]["group_0"]["input_activations"]["symmetric"], false);
  EXPECT_EQ(qc["config_groups"]["group_0"]["weights"]["strategy"], "channel");
  auto st = io::SafetensorsSource::Open(out_.string());
  ASSERT_TRUE(st.ok()) << st.status();
  for (const QuantizedLayer& layer : (*model)->layers()) {
    SCOPED_TRACE(layer.name);
    const at::Tensor zp = *(*st)->LoadStored(layer.name + ".input_zero_point");
    ASSERT_EQ(zp.scalar_type(), at::kChar);
    ASSERT_EQ(zp.numel(), 1);
    // uint8 code z is int8 code z - 128: x/s + z clamped to [0, 255] is
    // x/s + (z - 128) clamped to [-128, 127], shifted.
    EXPECT_EQ(zp.item<int>(), layer.input->static_qparams->zero_point.item<int>() - 128);
    EXPECT_EQ((*st)->LoadStored(layer.name + ".input_scale")->item<float>(),
              layer.input->static_qparams->scale.item<float>());
    const at::Tensor w = *(*st)->LoadStored(layer.name + ".weight");
    const at::Tensor scale = *(*st)->LoadStored(layer.name + ".weight_scale");
    ASSERT_EQ(w.scalar_type(), at::kChar);
    ASSERT_EQ(scale.dim(), 2);
    EXPECT_TRUE(at::equal(w.to(at::kFloat) * scale, *(*model)->Load(layer.name + ".weight")));
  }
}

TEST_F(CtExportTest, RefusesWhatVllmCannotLoad) {
  {  // down_proj's 172 inputs are no whole number of 8-code words.
    QuarkLayerSpecs g;
    g.weight = Spec(DataType::kInt4, QScheme::kPerChannel);
    auto model = Quantize(ConfigJson(g, {"lm_head"}));
    ASSERT_TRUE(model.ok()) << model.status();
    auto art = Export(**model);
    EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(art.status().message().find("model.layers.0.mlp.down_proj"), std::string::npos)
        << art.status();
    EXPECT_NE(art.status().message().find("in_features is 172"), std::string::npos);
    EXPECT_FALSE(fs::exists(out_));
  }
  {  // k_proj left in float while q_proj / v_proj are quantized: one qkv_proj.
    QuarkLayerSpecs g;
    g.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
    auto model = Quantize(ConfigJson(g, {"lm_head", "*k_proj"}));
    ASSERT_TRUE(model.ok()) << model.status();
    auto art = Export(**model);
    EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(art.status().message().find("qkv_proj"), std::string::npos) << art.status();
  }
  {  // Per-tensor int4 has no vLLM kernel.
    QuarkLayerSpecs g;
    g.weight = Spec(DataType::kInt4);
    auto model = Quantize(ConfigJson(g, {"lm_head", "*down_proj"}));
    ASSERT_TRUE(model.ok()) << model.status();
    auto art = Export(**model);
    EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(art.status().message().find("per-channel or per-group"), std::string::npos)
        << art.status();
  }
}

// The export read back: every tensor the model serves is the fake-quantized
// one bit for bit, the parameters are the stored ones (signed storage of an
// unsigned grid moves the zero point by 8), static and KV scales come back.
TEST_F(CtExportTest, ImportsItsOwnExportToTheSameValuesAndParameters) {
  struct Case {
    std::string name;
    std::string config;
  };
  QuarkLayerSpecs uint4;
  uint4.weight = Spec(DataType::kUInt4, QScheme::kPerGroup, 32, /*symmetric=*/false);
  QuarkLayerSpecs fp8;
  fp8.weight = Spec(DataType::kFp8E4M3);
  fp8.input = Spec(DataType::kFp8E4M3);
  QuarkLayerSpecs w8a8;
  w8a8.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  w8a8.input = Spec(DataType::kUInt8, QScheme::kPerTensor, {}, /*symmetric=*/false);
  const std::vector<Case> cases = {
      {"uint4", ConfigJson(uint4, {"lm_head", "*down_proj", "*gate_proj", "*up_proj"})},
      {"fp8_kv", ConfigJson(fp8, {"lm_head"}, Spec(DataType::kFp8E4M3))},
      {"w8a8_uint8_in", ConfigJson(w8a8, {"lm_head"})}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(out_);
    auto model = Quantize(c.config);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(Export(**model).ok());
    auto back = OpenCompressedTensorsModel(out_.string());
    ASSERT_TRUE(back.ok()) << back.status();
    int weights = 0;
    for (const std::string& name : (*model)->original().Names()) {
      SCOPED_TRACE(name);
      ASSERT_NE((*back)->original().Find(name), nullptr);
      auto want = (*model)->Load(name);
      auto got = (*back)->Load(name);
      ASSERT_TRUE(want.ok() && got.ok()) << got.status();
      EXPECT_TRUE(at::equal(*got, want->to(at::kFloat)));
      weights += (*back)->FindLayer(name.substr(0, name.size() - 7)) != nullptr;
    }
    for (const std::string& name : (*back)->original().Names())
      EXPECT_EQ(name.find("_scale"), std::string::npos) << name;
    for (const QuantizedLayer& layer : (*model)->layers()) {
      SCOPED_TRACE(layer.name);
      const QuantizedLayer* got = (*back)->FindLayer(layer.name);
      ASSERT_NE(got, nullptr);
      ASSERT_TRUE(got->weight.has_value());
      auto want_qp = (*model)->WeightQParams(layer.name);
      auto got_qp = (*back)->WeightQParams(layer.name);
      ASSERT_TRUE(want_qp.ok() && got_qp.ok()) << got_qp.status();
      EXPECT_TRUE(at::equal(got_qp->scale, want_qp->scale.to(at::kFloat)));
      if (layer.weight->dtype == DataType::kUInt4)
        EXPECT_TRUE(at::equal(got_qp->zero_point + 8, want_qp->zero_point.to(at::kInt)));
      if (layer.input) {
        ASSERT_TRUE(got->input && got->input->static_qparams);
        EXPECT_EQ(got->input->static_qparams->scale.item<float>(),
                  layer.input->static_qparams->scale.item<float>());
        if (layer.input->spec.dtype == DataType::kUInt8)
          EXPECT_EQ(got->input->static_qparams->zero_point.item<int>(),
                    layer.input->static_qparams->zero_point.item<int>() - 128);
      }
      if (layer.output) {
        ASSERT_TRUE(got->output && got->output->static_qparams);
        EXPECT_EQ(got->output->static_qparams->scale.item<float>(),
                  layer.output->static_qparams->scale.item<float>());
      }
    }
    EXPECT_GT(weights, 0);
  }
}

TEST_F(CtExportTest, ImportRefusesDamagedAndForeignCheckpoints) {
  QuarkLayerSpecs g;
  g.weight = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
  auto model = Quantize(ConfigJson(g, {"lm_head", "*down_proj"}));
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(Export(**model).ok());
  const std::string path = (out_ / "config.json").string();
  const json good = json::parse(ReadFile(path));
  auto with = [&](const std::function<void(json&)>& edit) {
    json cfg = good;
    edit(cfg["quantization_config"]);
    std::ofstream(path) << cfg.dump();
    return OpenCompressedTensorsModel(out_.string());
  };
  auto frozen = with([](json& q) { q["quantization_status"] = "frozen"; });
  EXPECT_EQ(frozen.status().code(), StatusCode::kFailedPrecondition) << frozen.status();
  auto regex = with([](json& q) { q["ignore"] = {"re:.*down_proj"}; });
  EXPECT_EQ(regex.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(regex.status().message().find("re:.*down_proj"), std::string::npos);
  auto bits = with([](json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 16; });
  EXPECT_EQ(bits.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(bits.status().message().find("num_bits 16"), std::string::npos) << bits.status();
  auto sparse = with([](json& q) { q["config_groups"]["group_0"]["format"] = "marlin-24"; });
  EXPECT_EQ(sparse.status().code(), StatusCode::kUnimplemented);
  auto junk = with([](json& q) { q["config_groups"]["group_0"]["weights"] = "int4"; });
  EXPECT_EQ(junk.status().code(), StatusCode::kFailedPrecondition);
  // A config that promises permuted groups the checkpoint does not hold.
  auto order =
      with([](json& q) { q["config_groups"]["group_0"]["weights"]["actorder"] = "group"; });
  ASSERT_TRUE(order.ok()) << order.status();
  auto unordered = (*order)->Load("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(unordered.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(unordered.status().message().find("q_proj.weight_g_idx is missing"), std::string::npos)
      << unordered.status();
  // A group size the stored scales do not have: opens (tensors are read
  // lazily), then loading the weight is DATA_LOSS naming the tensor.
  auto regroup = with([](json& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 16; });
  ASSERT_TRUE(regroup.ok()) << regroup.status();
  auto w = (*regroup)->Load("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(w.status().message().find("q_proj.weight_scale"), std::string::npos) << w.status();
}

}  // namespace
}  // namespace quantd::exporter
