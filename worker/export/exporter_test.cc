// ExportModel on stories260K quantized in memory (int8 per-channel weights,
// static int8 inputs on the MLP): every format writes its files atomically
// with sizes and sha256 that match the bytes on disk, the tensors each
// consumer reads have the expected names, dtypes and shapes, and refusals
// name the format.
#include "worker/export/exporter.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "worker/common/cancellation.h"
#include "worker/common/sha256.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/testing/in_memory_quantized_model.h"
#include "worker/io/gguf/gguf_tensor_source.h"
#include "worker/io/safetensors/safetensors_source.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

constexpr char kModel[] = "models/stories260K";

QuantSpec Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {}) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  return s;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// int8 per-channel weights everywhere but lm_head; the MLP's inputs also
// static per-tensor int8 (calibrated on the model's own text).
std::unique_ptr<testing::InMemoryQuantizedModel> Quantize(const QuantSpec& weight,
                                                          bool static_mlp_inputs) {
  QuarkLayerSpecs g;
  g.weight = weight;
  json cfg = {{"quant_method", "quark"},
              {"global_quant_config", QuarkLayerJson(g)},
              {"exclude", {"lm_head"}}};
  testing::InMemoryQuantizeOptions o;
  o.model_dir = kModel;
  if (static_mlp_inputs) {
    QuarkLayerSpecs mlp = g;
    mlp.input = Spec(DataType::kInt8);
    cfg["layer_quant_config"] = {{"*mlp.*", QuarkLayerJson(mlp)}};
    o.calibration_ids = at::arange(1, 129, at::kLong).reshape({2, 64});
  }
  o.quant_config_json = cfg.dump();
  auto m = testing::InMemoryQuantizedModel::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(m).value() : nullptr;
}

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::path(::testing::TempDir()) / ("exporter_" + std::to_string(::getpid()));
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }

  // The artifact's file list, sizes and digests are those of the directory.
  void ExpectDescribesDisk(const Artifact& a, const std::string& main_file) {
    EXPECT_EQ(a.path, out_.string());
    int64_t total = 0;
    size_t files_on_disk = 0;
    for (const auto& e : fs::recursive_directory_iterator(out_))
      if (e.is_regular_file() && e.path().filename() != kOwnerFile) ++files_on_disk;
    EXPECT_EQ(a.files.size(), files_on_disk);
    // Who wrote it is beside the model, not part of it.
    EXPECT_TRUE(fs::is_regular_file(out_ / kOwnerFile));
    for (const ArtifactFile& f : a.files) {
      const std::string bytes = ReadFile(out_ / f.path);
      EXPECT_EQ(f.bytes, static_cast<int64_t>(bytes.size())) << f.path;
      EXPECT_EQ(f.sha256, Sha256Hex(bytes)) << f.path;
      total += f.bytes;
    }
    EXPECT_EQ(a.bytes, total);
    EXPECT_EQ(a.sha256, Sha256Hex(ReadFile(out_ / main_file)));
    // Nothing is left beside the artifact (the staging directory is gone).
    int siblings = 0;
    for (const auto& e : fs::directory_iterator(out_.parent_path()))
      if (e.path().filename().string().rfind(out_.filename().string(), 0) == 0) ++siblings;
    EXPECT_EQ(siblings, 1);
  }

  fs::path out_;
};

TEST(ParseExportFormatTest, NamesRoundTripAndUnknownIsRefused) {
  for (ExportFormat f : {ExportFormat::kHfFakeQuantized, ExportFormat::kHfQuark,
                         ExportFormat::kGguf, ExportFormat::kOnnxQdq}) {
    auto p = ParseExportFormat(ExportFormatName(f));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(*p, f);
  }
  EXPECT_EQ(*ParseExportFormat("gguf"), ExportFormat::kGguf);
  auto bad = ParseExportFormat("safetensors");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("hf_quark"), std::string::npos);
}

TEST_F(ExporterTest, HfFakeQuantizedKeepsNamesAndDtypesWithQuantizedValues) {
  auto model = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), false);
  ASSERT_NE(model, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  auto r = ExportModel(*model, ExportFormat::kHfFakeQuantized, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->artifact.format, ExportFormat::kHfFakeQuantized);
  EXPECT_TRUE(r->notes.empty());
  ExpectDescribesDisk(r->artifact, "model.safetensors");
  auto st = io::SafetensorsSource::Open((out_ / "model.safetensors").string());
  ASSERT_TRUE(st.ok()) << st.status();
  const std::string q = "model.layers.2.self_attn.q_proj.weight";
  EXPECT_EQ((*st)->Find(q)->dtype, model->original().Find(q)->dtype);
  EXPECT_TRUE(at::equal(*(*st)->Load(q), *model->Load(q)));
  const json cfg = json::parse(ReadFile(out_ / "config.json"));
  EXPECT_EQ(cfg["quantization_config"]["global_quant_config"]["weight"]["dtype"], "int8");
  EXPECT_TRUE(fs::exists(out_ / "tokenizer.model"));
}

TEST_F(ExporterTest, HfQuarkStoresInt8CodesScalesAndStaticInputScales) {
  auto model = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), true);
  ASSERT_NE(model, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  auto r = ExportModel(*model, ExportFormat::kHfQuark, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectDescribesDisk(r->artifact, "model.safetensors");
  auto st = io::SafetensorsSource::Open((out_ / "model.safetensors").string());
  ASSERT_TRUE(st.ok()) << st.status();
  const std::string gate = "model.layers.1.mlp.gate_proj";
  const io::TensorInfo* w = (*st)->Find(gate + ".weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ((*st)->FindEntry(gate + ".weight")->dtype, io::SafetensorsDtype::kI8);
  EXPECT_EQ((*st)->Find(gate + ".weight_scale")->shape, (std::vector<int64_t>{172}));
  // Static input: a 0-dim scale equal to the calibrated one.
  const io::TensorInfo* in = (*st)->Find(gate + ".input_scale");
  ASSERT_NE(in, nullptr);
  EXPECT_TRUE(in->shape.empty());
  EXPECT_EQ((*st)->Load(gate + ".input_scale")->item<float>(),
            model->FindLayer(gate)->input->static_qparams->scale.item<float>());
  EXPECT_EQ((*st)->Find("model.layers.1.self_attn.q_proj.input_scale"), nullptr);
  // Codes times scale are the job's values.
  at::Tensor codes = (*st)->Load(gate + ".weight", at::kChar)->to(at::kFloat);
  at::Tensor scale = *(*st)->Load(gate + ".weight_scale");
  EXPECT_TRUE(at::equal(codes * scale.unsqueeze(1), *model->Load(gate + ".weight")));
  const json cfg = json::parse(ReadFile(out_ / "config.json"));
  EXPECT_EQ(cfg["quantization_config"]["export"]["weight_format"], "real_quantized");
  EXPECT_EQ(cfg["quantization_config"]["export"]["pack_method"], "reorder");
}

TEST_F(ExporterTest, GgufPicksQ8_0ForInt8AndReportsTheFallback) {
  // fp16 scales: Q8_0 stores d as fp16, so the job's values are kept bit for bit.
  QuantSpec int8 = Spec(DataType::kInt8, QScheme::kPerChannel);
  int8.scale_type = quant::ScaleType::kFloat16;
  auto model = Quantize(int8, false);
  ASSERT_NE(model, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  o.gguf_fallback_type = gguf::GgmlType::kF32;
  auto r = ExportModel(*model, ExportFormat::kGguf, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectDescribesDisk(r->artifact, "model.gguf");
  ASSERT_EQ(r->artifact.files.size(), 1u);
  EXPECT_EQ(r->artifact.files[0].path, "model.gguf");
  auto back = gguf::GgufTensorSource::Open((out_ / "model.gguf").string());
  ASSERT_TRUE(back.ok()) << back.status();
  const std::string gate = "model.layers.1.mlp.gate_proj.weight";
  const std::string down = "model.layers.1.mlp.down_proj.weight";  // 172 inputs
  EXPECT_EQ((*back)->Find(gate)->dtype, "Q8_0");
  EXPECT_TRUE(at::equal(*(*back)->Load(gate), *model->Load(gate)));
  EXPECT_EQ((*back)->Find(down)->dtype, "F32");
  EXPECT_TRUE(at::equal(*(*back)->Load(down), *model->Load(down)));
  // The down projections' fallback is reported for the job's events.
  ASSERT_FALSE(r->notes.empty());
  std::string notes;
  for (const std::string& n : r->notes) notes += n + "\n";
  EXPECT_NE(notes.find("down_proj"), std::string::npos) << notes;
}

TEST_F(ExporterTest, OnnxQdqWritesTheModelWithQdqNodesAndGenaiConfig) {
  auto model = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), true);
  ASSERT_NE(model, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  o.onnx_max_sequence_length = 64;
  int done = 0, total = -1;
  auto r = ExportModel(*model, ExportFormat::kOnnxQdq, o, [&](int d, int t) {
    done = d;
    total = t;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(done, total);
  ExpectDescribesDisk(r->artifact, "model.onnx");
  std::vector<std::string> files;
  for (const ArtifactFile& f : r->artifact.files) files.push_back(f.path);
  EXPECT_EQ(files, (std::vector<std::string>{"NOTICE.md", "genai_config.json", "model.onnx",
                                            "tokenizer.model"}));
  // The rotary tables' length is genai's context length.
  EXPECT_NE(ReadFile(out_ / "genai_config.json").find("\"context_length\": 64"), std::string::npos);
  const std::string bytes = ReadFile(out_ / "model.onnx");
  // Node op types and initializer names are plain strings in the protobuf.
  EXPECT_NE(bytes.find("QuantizeLinear"), std::string::npos);
  EXPECT_NE(bytes.find("DequantizeLinear"), std::string::npos);
  EXPECT_NE(bytes.find("model.layers.1.mlp.gate_proj.weight_scale"), std::string::npos);
}

TEST_F(ExporterTest, RefusalsNameTheFormatAndLeaveNothing) {
  // MXFP6 weights: GGUF and ONNX QDQ have no layout for them.
  auto mx = Quantize(Spec(DataType::kMxFp6E2M3, QScheme::kPerGroup, 32), false);
  ASSERT_NE(mx, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  for (ExportFormat f : {ExportFormat::kGguf, ExportFormat::kOnnxQdq}) {
    auto r = ExportModel(*mx, f, o);
    ASSERT_FALSE(r.ok()) << ExportFormatName(f);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(ExportFormatName(f)), std::string::npos) << r.status();
    EXPECT_FALSE(fs::exists(out_));
  }
  // An existing output without overwrite.
  auto int8 = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), false);
  ASSERT_NE(int8, nullptr);
  ASSERT_TRUE(ExportModel(*int8, ExportFormat::kHfQuark, o).ok());
  auto again = ExportModel(*int8, ExportFormat::kGguf, o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(out_ / "config.json"));
  EXPECT_FALSE(fs::exists(out_ / "model.gguf"));
  o.overwrite = true;
  auto replaced = ExportModel(*int8, ExportFormat::kGguf, o);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_FALSE(fs::exists(out_ / "config.json"));
  EXPECT_TRUE(fs::exists(out_ / "model.gguf"));
}

// Under target vllm an export vLLM cannot serve is refused before anything
// is written (for a model quantd could not read at CreateJob); the others
// name the consumers that load them.
TEST_F(ExporterTest, TargetVllmRefusesBeforeWritingAndArtifactsNameTheirConsumers) {
  auto w8a8 = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), true);
  ASSERT_NE(w8a8, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  o.target = ServingTarget::kVllm;
  // int8 weight-only attention: vLLM's Quark loader has no W8A16 scheme.
  auto r = ExportModel(*w8a8, ExportFormat::kHfQuark, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().reason(), "NOT_SERVABLE");
  EXPECT_EQ(r.status().message(),
            "target vllm: vLLM cannot serve this hf_quark export: "
            "model.layers.0.self_attn.q_proj (and 19 more): vLLM's Quark loader has no int8 "
            "weight-only scheme: quantize the inputs to int8 as well "
            "(w_int8_a_int8_per_tensor_sym, w_int8_a_int8_per_token_dynamic)");
  EXPECT_FALSE(fs::exists(out_));
  o.target = ServingTarget::kAny;
  auto any = ExportModel(*w8a8, ExportFormat::kHfQuark, o);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_TRUE(any->artifact.consumers.empty());
  o.overwrite = true;
  auto gguf = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), false);
  auto g = ExportModel(*gguf, ExportFormat::kGguf, o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->artifact.consumers, std::vector<std::string>{"llama.cpp"});
}

// A cancel (the job's CancellationScope) stops every format between tensors
// or blocks, and the staging directory goes with it.
TEST_F(ExporterTest, CancelStopsEachFormatMidWayAndLeavesNothing) {
  auto model = Quantize(Spec(DataType::kInt8, QScheme::kPerChannel), false);
  ASSERT_NE(model, nullptr);
  ExportOptions o;
  o.output_dir = out_.string();
  for (ExportFormat f : {ExportFormat::kHfFakeQuantized, ExportFormat::kHfQuark,
                         ExportFormat::kGguf, ExportFormat::kOnnxQdq}) {
    int checks = 0;
    CancellationScope scope([&checks] { return ++checks > 3; });
    auto r = ExportModel(*model, f, o);
    ASSERT_FALSE(r.ok()) << ExportFormatName(f);
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status();
    EXPECT_NE(r.status().message().find("exporting"), std::string::npos) << r.status();
    EXPECT_EQ(checks, 4) << ExportFormatName(f) << ": stopped at the first check that said so";
    EXPECT_FALSE(fs::exists(out_)) << ExportFormatName(f);
    for (const auto& e : fs::directory_iterator(out_.parent_path()))
      EXPECT_NE(e.path().filename().string().rfind(out_.filename().string(), 0), 0u)
          << "left behind: " << e.path();
  }
}

}  // namespace
}  // namespace quantd::exporter
