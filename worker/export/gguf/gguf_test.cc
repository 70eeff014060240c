// GGUF export of the quantized stories260K model: when the job's scheme is a
// ggml block format its codes are written as they are (read back through the
// GGUF reader, which dequantizes like ggml, the weights equal the job's
// values bit for bit); other schemes are requantized with ggml's reference
// quantizer and reported; rows that are not whole blocks fall back.
#include "worker/export/gguf/gguf.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "worker/export/export_support.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/testing/in_memory_quantized_model.h"
#include "worker/io/gguf/gguf_tensor_source.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;
using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

constexpr char kModel[] = "models/stories260K";
constexpr char kGate[] = "model.layers.1.mlp.gate_proj.weight";
constexpr char kQ[] = "model.layers.3.self_attn.q_proj.weight";  // RoPE-permuted rows
constexpr char kDown[] = "model.layers.0.mlp.down_proj.weight";  // 172 inputs

QuantSpec Spec(DataType t, QScheme q, std::optional<int> group, bool symmetric,
               quant::ScaleType scale_type = quant::ScaleType::kFloat16) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  s.scale_type = scale_type;
  return s;
}

// `down_proj`, when set, quantizes the down projections (172 inputs, not
// whole blocks of 32) with their own spec.
std::unique_ptr<testing::InMemoryQuantizedModel> Quantize(
    const QuantSpec& weight, const std::vector<std::string>& exclude,
    std::optional<QuantSpec> down_proj = std::nullopt, const std::string& model_dir = kModel) {
  QuarkLayerSpecs g;
  g.weight = weight;
  json cfg = {
      {"quant_method", "quark"}, {"global_quant_config", QuarkLayerJson(g)}, {"exclude", exclude}};
  if (down_proj) {
    QuarkLayerSpecs d;
    d.weight = down_proj;
    cfg["layer_quant_config"] = {{"*down_proj", QuarkLayerJson(d)}};
  }
  testing::InMemoryQuantizeOptions o;
  o.model_dir = model_dir;
  o.quant_config_json = cfg.dump();
  auto m = testing::InMemoryQuantizedModel::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(m).value() : nullptr;
}

class GgufExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::path(::testing::TempDir()) / ("gguf_export_" + std::to_string(::getpid()));
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }

  StatusOr<GgufExportResult> Export(const QuantizedModel& m, GgmlType type) {
    GgufModelExportOptions o;
    o.output_dir = out_.string();
    o.overwrite = true;
    o.weight_type = type;
    o.fallback_type = GgmlType::kF32;
    o.float_type = GgmlType::kF32;
    return ExportGguf(m, o);
  }

  std::unique_ptr<gguf::GgufTensorSource> ReadBack() {
    auto src = gguf::GgufTensorSource::Open((out_ / "model.gguf").string());
    EXPECT_TRUE(src.ok()) << src.status();
    return src.ok() ? std::move(src).value() : nullptr;
  }

  fs::path out_;
};

// The job's codes and fp16 scales are the blocks: bit-identical values.
TEST_F(GgufExportTest, BlockSchemesKeepTheJobsCodes) {
  struct Case {
    GgmlType type;
    QuantSpec spec;
  };
  const std::vector<Case> cases = {
      {GgmlType::kQ4_0, Spec(DataType::kInt4, QScheme::kPerGroup, 32, true)},
      {GgmlType::kQ8_0, Spec(DataType::kInt8, QScheme::kPerGroup, 32, true)},
      {GgmlType::kQ4_0, Spec(DataType::kUInt4, QScheme::kPerGroup, 64, true)},
      {GgmlType::kQ8_0, Spec(DataType::kInt4, QScheme::kPerChannel, std::nullopt, true)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(quant::DescribeSpec(c.spec) + " as " + gguf::GetGgmlTypeTraits(c.type).name);
    auto model = Quantize(c.spec, {"lm_head", "*down_proj"});
    ASSERT_NE(model, nullptr);
    int last = 0, total = 0;
    GgufModelExportOptions o;
    o.output_dir = out_.string();
    o.overwrite = true;
    o.weight_type = c.type;
    o.float_type = GgmlType::kF32;
    auto r = ExportGguf(*model, o, [&](int d, int t) {
      last = d;
      total = t;
    });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(last, total);
    EXPECT_EQ(r->exact_code_tensors, 5 * 6);  // q, k, v, o, gate, up of 5 blocks
    EXPECT_TRUE(r->notes.empty()) << r->notes[0];
    EXPECT_EQ(r->artifact.format, ExportFormat::kGguf);
    auto back = ReadBack();
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(back->Find(kGate)->dtype, gguf::GetGgmlTypeTraits(c.type).name);
    for (const char* name : {kGate, kQ}) {
      EXPECT_TRUE(at::equal(*back->Load(name), *model->Load(name))) << name;
    }
    // Excluded down_proj and the embedding stay exact float.
    EXPECT_EQ(back->Find(kDown)->dtype, "F32");
    EXPECT_TRUE(at::equal(*back->Load(kDown), *model->Load(kDown)));
    EXPECT_TRUE(at::equal(*back->Load("model.embed_tokens.weight"),
                          *model->Load("model.embed_tokens.weight")));
  }
}

// Q4_1 keeps the codes; m = (qmin - zp) * d is rounded to fp16.
TEST_F(GgufExportTest, AsymmetricUint4IsQ4_1WithTheJobsCodes) {
  auto model = Quantize(Spec(DataType::kUInt4, QScheme::kPerGroup, 32, false), {"lm_head"},
                        Spec(DataType::kUInt4, QScheme::kPerChannel, std::nullopt, false));
  ASSERT_NE(model, nullptr);
  auto r = Export(*model, GgmlType::kQ4_1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exact_code_tensors, 5 * 6);
  ASSERT_EQ(r->notes.size(), 2u);
  EXPECT_NE(r->notes[0].find("written as F32"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[0].find("5 weights"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[1].find("rounded to fp16"), std::string::npos) << r->notes[1];
  auto back = ReadBack();
  ASSERT_NE(back, nullptr);
  for (const char* name : {kGate, kQ}) {
    at::Tensor got = *back->Load(name), want = *model->Load(name);
    auto qp = model->WeightQParams(std::string(name).substr(0, std::string(name).size() - 7));
    // The only difference is m's fp16 rounding: at most half an fp16 ulp of
    // |zp * scale| <= 15 * scale.
    const double bound = (qp->scale.max().item<float>() * 15.0) * std::ldexp(1.0, -11);
    EXPECT_LE((got - want).abs().max().item<float>(), bound) << name;
    // Same codes: the grid index of every element is unchanged.
    at::Tensor idx_got = ((got - got.reshape({got.size(0), -1, 32})
                                     .amin(-1, true)
                                     .expand({got.size(0), got.size(1) / 32, 32})
                                     .reshape(got.sizes())) /
                          qp->scale.repeat_interleave(32, 1))
                             .round();
    at::Tensor idx_want = ((want - want.reshape({want.size(0), -1, 32})
                                       .amin(-1, true)
                                       .expand({want.size(0), want.size(1) / 32, 32})
                                       .reshape(want.sizes())) /
                           qp->scale.repeat_interleave(32, 1))
                              .round();
    EXPECT_TRUE(at::equal(idx_got, idx_want)) << name;
  }
  EXPECT_EQ(back->Find(kDown)->dtype, "F32");
  EXPECT_TRUE(at::equal(*back->Load(kDown), *model->Load(kDown)));
}

// A scheme that is no ggml code set is requantized with ggml's reference
// quantizer from the job's values, and the export says so.
TEST_F(GgufExportTest, OtherSchemesAreRequantizedAndReported) {
  QuantSpec fp8;
  fp8.dtype = DataType::kFp8E4M3;
  auto model = Quantize(fp8, {"lm_head", "*down_proj"});
  ASSERT_NE(model, nullptr);
  auto r = Export(*model, GgmlType::kQ4_0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exact_code_tensors, 0);
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_NE(r->notes[0].find("requantized"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[0].find("fp8_e4m3"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[0].find("30 weights"), std::string::npos) << r->notes[0];
  auto back = ReadBack();
  ASSERT_NE(back, nullptr);
  // The block bytes are ggml's Q4_0 of the job's values.
  at::Tensor v = model->Load(kGate)->contiguous();
  std::vector<uint8_t> blocks(*gguf::GgmlRowBytes(GgmlType::kQ4_0, v.numel()));
  gguf::QuantizeRowQ4_0(v.data_ptr<float>(), blocks.data(), v.numel());
  std::vector<float> deq(v.numel());
  gguf::DequantizeRowQ4_0(blocks.data(), deq.data(), v.numel());
  at::Tensor want = at::from_blob(deq.data(), v.sizes(), at::kFloat).clone();
  EXPECT_TRUE(at::equal(*back->Load(kGate), want));

  // F32 holds the job's values exactly.
  r = Export(*model, GgmlType::kF32);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->notes.empty());
  back = ReadBack();
  EXPECT_TRUE(at::equal(*back->Load(kQ), *model->Load(kQ)));
}

// The tensors a job left in float (the embedding, excluded layers) are F32
// unless the job asks for F16 or BF16 (issue 25: they were F16 without a
// word); the export names which tensors went to which type.
TEST_F(GgufExportTest, FloatTensorsAreF32ByDefaultOrTheChosenTypeAndReported) {
  auto model = Quantize(Spec(DataType::kInt8, QScheme::kPerGroup, 32, true), {"lm_head", "*down_proj"});
  ASSERT_NE(model, nullptr);
  const std::string floats =
      "6 float weights (model.embed_tokens.weight, model.layers.0.mlp.down_proj.weight, "
      "model.layers.1.mlp.down_proj.weight, model.layers.2.mlp.down_proj.weight, "
      "model.layers.3.mlp.down_proj.weight, model.layers.4.mlp.down_proj.weight)";
  struct Case {
    std::optional<GgmlType> float_type;  // unset: the default
    const char* name;
    at::ScalarType rounding;
    std::vector<std::string> lines;
  };
  const std::vector<Case> cases = {
      {std::nullopt, "F32", at::kFloat,
       {"gguf F32: " + floats + ", 11 norms and biases", "gguf Q8_0: 30 quantized weights"}},
      {GgmlType::kF16, "F16", at::kHalf,
       {"gguf F32: 11 norms and biases", "gguf F16: " + floats, "gguf Q8_0: 30 quantized weights"}},
      {GgmlType::kBF16, "BF16", at::kBFloat16,
       {"gguf F32: 11 norms and biases", "gguf Q8_0: 30 quantized weights",
        "gguf BF16: " + floats}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GgufModelExportOptions o;
    o.output_dir = out_.string();
    o.overwrite = true;
    o.weight_type = GgmlType::kQ8_0;
    if (c.float_type) o.float_type = *c.float_type;
    auto r = ExportGguf(*model, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tensor_types, c.lines);
    auto back = ReadBack();
    ASSERT_NE(back, nullptr);
    for (const char* name : {kDown, "model.embed_tokens.weight"}) {
      EXPECT_EQ(back->Find(name)->dtype, c.name) << name;
      const at::Tensor want = model->Load(name)->to(c.rounding).to(at::kFloat);
      EXPECT_TRUE(at::equal(*back->Load(name), want)) << name;
    }
    EXPECT_EQ(back->Find(kGate)->dtype, "Q8_0");
    EXPECT_EQ(back->Find("model.norm.weight")->dtype, "F32");
  }
}

// MXFP4 weights are ggml's MXFP4 blocks holding the job's codes and E8M0
// exponents: read back, the same values; down_proj's 172-wide rows (five
// blocks and a partial one) are written as their values.
TEST_F(GgufExportTest, Mxfp4WeightsAreMxfp4BlocksWithTheJobsCodes) {
  QuantSpec mx;
  mx.dtype = DataType::kMxFp4;
  mx.qscheme = QScheme::kPerGroup;
  mx.ch_axis = -1;
  mx.group_size = 32;
  auto model = Quantize(mx, {"lm_head"});
  ASSERT_NE(model, nullptr);
  GgufModelExportOptions o;
  o.output_dir = out_.string();
  o.weight_type = DefaultGgufWeightType(ExportLayerSpecsOf(*model));
  EXPECT_EQ(o.weight_type, GgmlType::kMXFP4);
  o.float_type = GgmlType::kF32;
  o.fallback_type = GgmlType::kF32;
  auto r = ExportGguf(*model, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exact_code_tensors, 5 * 6);
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_NE(r->notes[0].find("GGUF MXFP4: rows of 172 are not whole blocks of 32; written as F32 "
                             "values: 5 weights"),
            std::string::npos)
      << r->notes[0];
  auto back = ReadBack();
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(*back->file().GetInt("general.file_type"), 38);
  EXPECT_EQ(back->Find(kGate)->dtype, "MXFP4");
  EXPECT_EQ(back->Find(kDown)->dtype, "F32");
  for (const char* name : {kGate, kQ, kDown}) {
    EXPECT_TRUE(at::equal(*back->Load(name), *model->Load(name))) << name;
  }
}

// The chat template and pad token of tokenizer_config.json reach the GGUF
// metadata as llama.cpp's converter writes them, with
// general.quantization_version; a malformed template is refused naming the
// file.
TEST_F(GgufExportTest, CarriesTheChatTemplatePadTokenAndQuantizationVersion) {
  const fs::path dir = fs::path(::testing::TempDir()) / "stories_chat";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    fs::copy_file(fs::path(kModel) / f, dir / f);
  const std::string chat = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"chat_template", json::array({{{"name", "default"}, {"template", chat}},
                                             {{"name", "tool_use"}, {"template", "T"}}})},
              {"pad_token", {{"content", "<unk>"}}}}
             .dump();
  auto model = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel, std::nullopt, true),
                        {"lm_head"}, std::nullopt, dir.string());
  ASSERT_NE(model, nullptr);
  auto r = Export(*model, GgmlType::kQ8_0);
  ASSERT_TRUE(r.ok()) << r.status();
  auto back = ReadBack();
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(*back->file().GetString("tokenizer.chat_template"), chat);
  EXPECT_EQ(*back->file().GetString("tokenizer.chat_template.tool_use"), "T");
  EXPECT_EQ(*back->file().GetInt("tokenizer.ggml.padding_token_id"), 0);  // <unk>
  EXPECT_EQ(*back->file().GetInt("general.quantization_version"), 2);

  std::ofstream(dir / "tokenizer_config.json", std::ios::trunc) << R"({"chat_template": 7})";
  auto bad = Export(*model, GgmlType::kQ8_0);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tokenizer_config.json: chat_template is neither"),
            std::string::npos)
      << bad.status();
  fs::remove_all(dir);
}

TEST_F(GgufExportTest, RefusesWhatGgufCannotExpress) {
  QuantSpec mx;
  mx.dtype = DataType::kMxFp6E2M3;
  auto model = Quantize(mx, {"lm_head"});
  ASSERT_NE(model, nullptr);
  auto r = Export(*model, GgmlType::kQ8_0);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().reason(), "EXPORT_FORMAT_UNSUPPORTED");
  EXPECT_NE(r.status().message().find("gguf cannot express mxfp6_e2m3"), std::string::npos)
      << r.status();
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(GgufExportTest, RefusesOtherTypesAndExistingOutput) {
  auto model =
      Quantize(Spec(DataType::kInt8, QScheme::kPerChannel, std::nullopt, true), {"lm_head"});
  ASSERT_NE(model, nullptr);
  GgufModelExportOptions o;
  o.output_dir = out_.string();
  o.weight_type = GgmlType::kQ6_K;
  auto r = ExportGguf(*model, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Q6_K"), std::string::npos);
  o.weight_type = GgmlType::kQ8_0;
  ASSERT_TRUE(ExportGguf(*model, o).ok());
  auto again = ExportGguf(*model, o);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().reason(), "OUTPUT_EXISTS");
}

}  // namespace
}  // namespace quantd::exporter
