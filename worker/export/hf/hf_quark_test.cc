// HF quark export of the real stories260K model: for int4 / uint4 per-group,
// int8 W8A8 static, FP8 W8A8 with an FP8 KV cache, MXFP4 and MXFP6, the
// directory written by ExportHfQuark imports back (OpenQuarkModel) to the
// bit-identical quantized model, whose block-wise perplexity equals the
// fake-quantized model's; the packed layouts are checked against a float64
// unpacking written here from the format's description, independently of the
// exporter's code.
#include "worker/export/hf/hf_quark.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gtest/gtest.h"
#include "worker/eval/eval_windows.h"
#include "worker/eval/perplexity.h"
#include "worker/export/hf/hf_quark_import.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/quantized_model_runner.h"
#include "worker/export/testing/in_memory_quantized_model.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/io/tokenizer/load_tokenizer.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

constexpr char kModel[] = "models/stories260K";
constexpr int64_t kNctx = 128;
constexpr int64_t kEvalWindows = 12;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Text {
  std::vector<int32_t> ids;
  int32_t bos = -1;
};

const Text& EvalText() {
  static const Text* text = [] {
    auto* t = new Text;
    auto tok = io::LoadTokenizerFromDir(kModel);
    if (!tok.ok()) {
      ADD_FAILURE() << tok.status();
      return t;
    }
    t->ids = (*tok)->Encode(ReadFile("tests/data/tinystories-sample.txt"));
    t->bos = (*tok)->bos_id();
    return t;
  }();
  return *text;
}

// Four calibration windows of 64 tokens from the end of the text (the
// evaluation uses its start).
at::Tensor CalibrationIds() {
  const auto& ids = EvalText().ids;
  at::Tensor out = at::empty({4, 64}, at::kLong);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 64; ++j) out[i][j] = ids[ids.size() - 1 - (i * 64 + j)];
  return out;
}

QuantSpec Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {},
               bool symmetric = true) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  return s;
}

struct Scheme {
  std::string name;
  QuarkLayerSpecs global;
  std::vector<std::string> exclude;
  std::optional<QuantSpec> kv_cache;  // output_tensors of *k_proj / *v_proj
};

std::string ConfigJson(const Scheme& s) {
  json cfg = {{"quant_method", "quark"},
              {"global_quant_config", QuarkLayerJson(s.global)},
              {"layer_type_quant_config", json::object()},
              {"layer_quant_config", json::object()},
              {"exclude", s.exclude}};
  if (s.kv_cache) {
    QuarkLayerSpecs kv = s.global;
    kv.output = s.kv_cache;
    cfg["layer_quant_config"]["*k_proj"] = QuarkLayerJson(kv);
    cfg["layer_quant_config"]["*v_proj"] = QuarkLayerJson(kv);
  }
  return cfg.dump();
}

std::vector<Scheme> Schemes() {
  std::vector<Scheme> out;
  {  // int4 per group 32; down_proj (in 172) is not a multiple of 32.
    Scheme s{"int4_g32", {}, {"lm_head", "*down_proj"}, {}};
    s.global.weight = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
    out.push_back(s);
  }
  {  // uint4 asymmetric per group 4: every layer, zero points packed.
    Scheme s{"uint4_g4_asym", {}, {"lm_head"}, {}};
    s.global.weight = Spec(DataType::kUInt4, QScheme::kPerGroup, 4, /*symmetric=*/false);
    out.push_back(s);
  }
  {  // int8 W8A8: per-channel weights, static per-tensor inputs.
    Scheme s{"int8_w8a8", {}, {"lm_head"}, {}};
    s.global.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
    s.global.weight->ch_axis = 0;
    s.global.input = Spec(DataType::kInt8);
    out.push_back(s);
  }
  {  // FP8 W8A8 static with an FP8 KV cache.
    Scheme s{"fp8_w8a8_kv", {}, {"lm_head"}, Spec(DataType::kFp8E4M3)};
    s.global.weight = Spec(DataType::kFp8E4M3);
    s.global.input = Spec(DataType::kFp8E4M3);
    out.push_back(s);
  }
  {  // MXFP4 everywhere; down_proj's 172 inputs end in a padded block.
    Scheme s{"mxfp4", {}, {"lm_head"}, {}};
    s.global.weight = Spec(DataType::kMxFp4, QScheme::kPerGroup, 32);
    out.push_back(s);
  }
  {  // MXFP6 e2m3 and asymmetric uint8 per group (a transposed I8 layout).
    Scheme s{"mxfp6", {}, {"lm_head"}, {}};
    s.global.weight = Spec(DataType::kMxFp6E2M3, QScheme::kPerGroup, 32);
    out.push_back(s);
  }
  {
    Scheme s{"uint8_g4_asym", {}, {"lm_head"}, {}};
    s.global.weight = Spec(DataType::kUInt8, QScheme::kPerGroup, 4, /*symmetric=*/false);
    out.push_back(s);
  }
  return out;
}

double Perplexity(const QuantizedModel& model) {
  auto runner = QuantizedModelRunner::Create(model);
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return -1;
  const Text& text = EvalText();
  auto windows = eval::MakeEvalWindows(text.ids, text.bos, {kNctx, kEvalWindows});
  EXPECT_TRUE(windows.ok()) << windows.status();
  eval::EvalOptions opt;
  opt.batch_size = kEvalWindows;
  auto r = eval::EvaluatePerplexity((*runner)->Blockwise(), *windows, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->ppl : -1;
}

class HfQuarkTest : public ::testing::TestWithParam<Scheme> {
 protected:
  void SetUp() override {
    out_ = fs::path(::testing::TempDir()) / ("hf_quark_" + GetParam().name);
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }
  fs::path out_;
};

// ---- float64 unpacking written from the format's description ----

double Fp4Value(int code) {  // e2m1: sign | 2 exponent bits (bias 1) | 1 mantissa bit
  const int e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return (code & 8) ? -mag : mag;
}

double Fp6E2M3Value(int code) {  // sign | 2 exponent bits (bias 1) | 3 mantissa bits
  const int e = (code >> 3) & 3, m = code & 7;
  const double mag = e == 0 ? m / 8.0 : std::ldexp(1.0 + m / 8.0, e - 1);
  return (code & 32) ? -mag : mag;
}

double Fp8E4M3Value(int code) {  // sign | 4 exponent bits (bias 7) | 3 mantissa bits
  const int e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (code & 128) ? -mag : mag;
}

// The nibble of element j (0..7) within its int32 word: order 0,2,4,6,1,3,5,7.
int NibbleOf(int j) { return j % 2 == 0 ? j / 2 : 4 + j / 2; }

int Int4At(const at::Tensor& words, int64_t row, int64_t col, bool is_signed) {
  const uint32_t word = static_cast<uint32_t>(words[row][col / 8].item<int32_t>());
  int v = static_cast<int>((word >> (4 * NibbleOf(static_cast<int>(col % 8)))) & 0xF);
  return (is_signed && v >= 8) ? v - 16 : v;
}

// Dequantizes `module`'s stored weight from the raw safetensors tensors.
at::Tensor UnpackInFloat64(const io::SafetensorsSource& st, const std::string& module,
                           const QuantSpec& spec, int64_t out_f, int64_t in_f) {
  at::Tensor w = *st.LoadStored(module + ".weight");
  at::Tensor scale = *st.LoadStored(module + ".weight_scale");
  at::Tensor result = at::empty({out_f, in_f}, at::kDouble);
  auto r = result.accessor<double, 2>();
  if (spec.dtype == DataType::kInt4 || spec.dtype == DataType::kUInt4) {
    const bool sgn = spec.dtype == DataType::kInt4;
    at::Tensor zp = *st.LoadStored(module + ".weight_zero_point");
    EXPECT_EQ(w.scalar_type(), at::kInt);
    const int64_t gs = *spec.group_size;
    EXPECT_EQ(w.sizes().vec(), (std::vector<int64_t>{in_f, (out_f + 7) / 8}));
    EXPECT_EQ(scale.sizes().vec(), (std::vector<int64_t>{in_f / gs, out_f}));
    EXPECT_EQ(zp.sizes().vec(), (std::vector<int64_t>{in_f / gs, (out_f + 7) / 8}));
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i)
        r[o][i] = (Int4At(w, i, o, sgn) - Int4At(zp, i / gs, o, sgn)) *
                  static_cast<double>(scale[i / gs][o].item<float>());
  } else if (spec.dtype == DataType::kUInt8) {
    at::Tensor zp = *st.LoadStored(module + ".weight_zero_point");
    const int64_t gs = *spec.group_size;
    EXPECT_EQ(w.scalar_type(), at::kByte);
    EXPECT_EQ(w.sizes().vec(), (std::vector<int64_t>{in_f, out_f}));
    EXPECT_EQ(zp.sizes().vec(), (std::vector<int64_t>{in_f / gs, out_f}));
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i)
        r[o][i] = (w[i][o].item<int>() - zp[i / gs][o].item<int>()) *
                  static_cast<double>(scale[i / gs][o].item<float>());
  } else if (spec.dtype == DataType::kInt8) {
    at::Tensor zp = *st.LoadStored(module + ".weight_zero_point");
    EXPECT_EQ(w.scalar_type(), at::kChar);
    EXPECT_EQ(w.sizes().vec(), (std::vector<int64_t>{out_f, in_f}));
    EXPECT_EQ(scale.sizes().vec(), (std::vector<int64_t>{out_f}));
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i)
        r[o][i] =
            (w[o][i].item<int>() - zp[o].item<int>()) * static_cast<double>(scale[o].item<float>());
  } else if (spec.dtype == DataType::kFp8E4M3) {
    EXPECT_EQ(st.FindEntry(module + ".weight")->dtype, io::SafetensorsDtype::kF8E4M3);
    EXPECT_EQ(scale.dim(), 0);
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i)
        r[o][i] = Fp8E4M3Value(w[o][i].item<int>()) * static_cast<double>(scale.item<float>());
  } else {  // MXFP4 / MXFP6 e2m3
    EXPECT_EQ(scale.scalar_type(), at::kByte);
    EXPECT_EQ(scale.sizes().vec(), (std::vector<int64_t>{out_f, (in_f + 31) / 32}));
    const bool fp4 = spec.dtype == DataType::kMxFp4;
    EXPECT_EQ(w.sizes().vec(), (std::vector<int64_t>{out_f, fp4 ? in_f / 2 : in_f / 4 * 3}));
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i) {
        int code;
        if (fp4) {
          const int byte = w[o][i / 2].item<int>();
          code = i % 2 == 0 ? (byte & 0xF) : (byte >> 4);
        } else {
          const int64_t b = i / 4 * 3;
          const uint32_t word =
              w[o][b].item<int>() | w[o][b + 1].item<int>() << 8 | w[o][b + 2].item<int>() << 16;
          code = (word >> (6 * (i % 4))) & 0x3F;
        }
        const double x = std::ldexp(1.0, scale[o][i / 32].item<int>() - 127);
        r[o][i] = (fp4 ? Fp4Value(code) : Fp6E2M3Value(code)) * x;
      }
  }
  return result;
}

TEST_P(HfQuarkTest, ExportImportsBackToTheSameModel) {
  const Scheme& scheme = GetParam();
  testing::InMemoryQuantizeOptions qo;
  qo.model_dir = kModel;
  qo.quant_config_json = ConfigJson(scheme);
  qo.calibration_ids = CalibrationIds();
  auto model = testing::InMemoryQuantizedModel::Create(qo);
  ASSERT_TRUE(model.ok()) << model.status();

  HfQuarkExportOptions eo;
  eo.output_dir = out_.string();
  int done = 0, total = 0;
  auto art = ExportHfQuark(**model, eo, [&](int d, int t) {
    done = d;
    total = t;
  });
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(done, total);
  EXPECT_EQ(art->format, ExportFormat::kHfQuark);
  EXPECT_FALSE(art->sha256.empty());

  // config.json: the job's JSON plus the export section.
  const json cfg = json::parse(ReadFile((out_ / "config.json").string()));
  const json& qc = cfg["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "quark");
  EXPECT_EQ(qc["export"]["weight_format"], "real_quantized");
  EXPECT_EQ(qc["export"]["pack_method"], "reorder");
  EXPECT_EQ(qc["global_quant_config"], json::parse(ConfigJson(scheme))["global_quant_config"]);
  EXPECT_EQ(qc["export"]["kv_cache_group"],
            scheme.kv_cache ? json({"*k_proj", "*v_proj"}) : json::array());

  auto imported = OpenQuarkModel(out_.string());
  ASSERT_TRUE(imported.ok()) << imported.status();
  ASSERT_EQ((*imported)->layers().size(), (*model)->layers().size());
  auto st = io::SafetensorsSource::Open(out_.string());
  ASSERT_TRUE(st.ok()) << st.status();
  bool checked_layout = false;
  for (const QuantizedLayer& layer : (*model)->layers()) {
    SCOPED_TRACE(layer.name);
    const QuantizedLayer* back = (*imported)->FindLayer(layer.name);
    ASSERT_NE(back, nullptr);
    auto want = (*model)->Load(layer.name + ".weight");
    auto got = (*imported)->Load(layer.name + ".weight");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(at::equal(*got, *want));
    auto want_qp = (*model)->WeightQParams(layer.name);
    auto got_qp = (*imported)->WeightQParams(layer.name);
    ASSERT_TRUE(got_qp.ok()) << got_qp.status();
    EXPECT_TRUE(at::equal(got_qp->scale.to(at::kFloat), want_qp->scale.to(at::kFloat)));
    for (auto [a, b] : {std::make_pair(&layer.input, &back->input),
                        std::make_pair(&layer.output, &back->output)}) {
      ASSERT_EQ(a->has_value(), b->has_value());
      if (!a->has_value() || (*a)->spec.is_dynamic) continue;
      EXPECT_EQ((*b)->static_qparams->scale.item<float>(),
                (*a)->static_qparams->scale.item<float>());
    }
    if (!checked_layout || layer.name.find("down_proj") != std::string::npos) {
      // The independent float64 unpacking gives the fake-quantized values.
      at::Tensor ref =
          UnpackInFloat64(**st, layer.name, *layer.weight, want->size(0), want->size(1));
      EXPECT_TRUE(at::equal(ref.to(at::kFloat), *want))
          << "max |diff| " << (ref - want->to(at::kDouble)).abs().max().item<double>();
      checked_layout = true;
    }
  }
  // Static activation and KV-cache scales under the names vLLM maps.
  if (scheme.global.input) {
    EXPECT_NE((*st)->Find("model.layers.0.self_attn.q_proj.input_scale"), nullptr);
  }
  if (scheme.kv_cache) {
    const auto* k = (*st)->Find("model.layers.2.self_attn.k_proj.output_scale");
    const auto* v = (*st)->Find("model.layers.2.self_attn.v_proj.output_scale");
    ASSERT_NE(k, nullptr);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ((*st)->Load(k->name)->item<float>(), (*st)->Load(v->name)->item<float>());
  }
  // Unquantized tensors keep their names, dtypes and values.
  auto norm = (*st)->Load("model.norm.weight");
  ASSERT_TRUE(norm.ok());
  EXPECT_TRUE(at::equal(*norm, *(*model)->original().Load("model.norm.weight")));

  const double ppl_fake = Perplexity(**model);
  const double ppl_imported = Perplexity(**imported);
  EXPECT_GT(ppl_fake, 1.0);
  EXPECT_EQ(ppl_imported, ppl_fake);
}

INSTANTIATE_TEST_SUITE_P(Schemes, HfQuarkTest, ::testing::ValuesIn(Schemes()),
                         [](const auto& info) { return info.param.name; });

TEST(HfQuarkExport, RefusesWhatTheFormatCannotHoldAndExistingOutput) {
  const fs::path out = fs::path(::testing::TempDir()) / "hf_quark_refused";
  fs::remove_all(out);
  Scheme int2{"int2", {}, {"lm_head"}, {}};
  int2.global.weight = Spec(DataType::kInt2, QScheme::kPerChannel);
  testing::InMemoryQuantizeOptions qo;
  qo.model_dir = kModel;
  qo.quant_config_json = ConfigJson(int2);
  auto model = testing::InMemoryQuantizedModel::Create(qo);
  ASSERT_TRUE(model.ok()) << model.status();
  HfQuarkExportOptions eo;
  eo.output_dir = out.string();
  auto art = ExportHfQuark(**model, eo);
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(art.status().reason(), "EXPORT_FORMAT_UNSUPPORTED");
  EXPECT_NE(art.status().message().find("model.layers.0.self_attn.q_proj"), std::string::npos);
  EXPECT_NE(art.status().message().find("int2"), std::string::npos);
  EXPECT_FALSE(fs::exists(out));

  Scheme int8{"int8", {}, {"lm_head"}, {}};
  int8.global.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  qo.quant_config_json = ConfigJson(int8);
  model = testing::InMemoryQuantizedModel::Create(qo);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(ExportHfQuark(**model, eo).ok());
  auto again = ExportHfQuark(**model, eo);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().reason(), "OUTPUT_EXISTS");
  eo.overwrite = true;
  eo.max_shard_bytes = 100000;  // several shards and an index
  auto sharded = ExportHfQuark(**model, eo);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  EXPECT_GT(sharded->files.size(), 5u);
  auto imported = OpenQuarkModel(out.string());
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(at::equal(*(*imported)->Load("model.layers.4.mlp.down_proj.weight"),
                        *(*model)->Load("model.layers.4.mlp.down_proj.weight")));
  fs::remove_all(out);
}

}  // namespace
}  // namespace quantd::exporter
