// ONNX QDQ export of the quantized stories260K model. The int8 W8A8 graph
// (opset 13) passes Debian's python3-onnx checker with full shape inference;
// every export's structure (opset, IR version, Q/DQ nodes, initializer
// types and shapes) is read back with python3-onnx and compared with the
// quantization. Logits are compared with the engine in onnxruntime by the
// peer test (tests/peers:onnx_peer_test).
#include "worker/export/onnx/onnx_qdq.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/onnx/onnx_proto.h"
#include "worker/export/testing/in_memory_quantized_model.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

constexpr char kModel[] = "models/stories260K";

// Runs /usr/bin/python3 with `script` and returns its stdout; `ok` tells
// whether it exited 0.
std::string Python(const std::string& script, const std::string& arg, bool* ok) {
  const fs::path py = fs::path(::testing::TempDir()) / "onnx_probe.py";
  std::FILE* f = std::fopen(py.c_str(), "w");
  std::fputs(script.c_str(), f);
  std::fclose(f);
  const std::string cmd = "/usr/bin/python3 " + py.string() + " " + arg + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *ok = ::pclose(p) == 0;
  return out;
}

// Summary of a model file, as python3-onnx parses it.
constexpr char kDescribe[] = R"(
import json, sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
ops = {}
for n in m.graph.node:
    ops[n.op_type] = ops.get(n.op_type, 0) + 1
inits = {i.name: [int(i.data_type), list(i.dims)] for i in m.graph.initializer}
print(json.dumps({
    "ir_version": m.ir_version,
    "opset": [[o.domain, o.version] for o in m.opset_import],
    "ops": ops,
    "inits": inits,
    "inputs": [i.name for i in m.graph.input],
    "outputs": [o.name for o in m.graph.output],
    "input_shapes": {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                     for i in m.graph.input},
    "output_shapes": {o.name: [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]
                      for o in m.graph.output},
    "cast_to": {n.name: [a.i for a in n.attribute if a.name == "to"][0]
                for n in m.graph.node if n.op_type == "Cast"},
    "node_attrs": {n.name: {a.name: a.i for a in n.attribute if a.type == a.INT}
                   for n in m.graph.node if n.domain == "com.microsoft"},
    "q_proj_scale": numpy_helper.to_array(
        [i for i in m.graph.initializer
         if i.name == "model.layers.0.self_attn.q_proj.weight_scale"][0]).tolist()
        if any(i.name == "model.layers.0.self_attn.q_proj.weight_scale"
               for i in m.graph.initializer) else None,
}))
)";

constexpr char kCheck[] = R"(
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
print("checked", len(inferred.graph.value_info))
)";

QuantSpec Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {},
               bool symmetric = true) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  return s;
}

std::unique_ptr<testing::InMemoryQuantizedModel> Quantize(
    const QuarkLayerSpecs& global, std::optional<QuantSpec> kv = {},
    const std::vector<std::string>& exclude = {"lm_head"}) {
  json cfg = {{"quant_method", "quark"},
              {"global_quant_config", QuarkLayerJson(global)},
              {"exclude", exclude}};
  if (kv) {
    QuarkLayerSpecs k = global;
    k.output = kv;
    cfg["layer_quant_config"] = {{"*k_proj", QuarkLayerJson(k)}, {"*v_proj", QuarkLayerJson(k)}};
  }
  testing::InMemoryQuantizeOptions o;
  o.model_dir = kModel;
  o.quant_config_json = cfg.dump();
  at::Tensor ids = at::arange(2 * 48, at::kLong).reshape({2, 48}) % 500 + 3;
  o.calibration_ids = ids;
  auto m = testing::InMemoryQuantizedModel::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(m).value() : nullptr;
}

class OnnxQdqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::path(::testing::TempDir()) / ("onnx_" + std::to_string(::getpid()));
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }

  json Describe(const QuantizedModel& model, OnnxQdqExportResult* result) {
    OnnxQdqExportOptions o;
    o.output_dir = out_.string();
    o.overwrite = true;
    int done = 0, total = 0;
    auto r = ExportOnnxQdq(model, o, [&](int d, int t) {
      done = d;
      total = t;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return json();
    EXPECT_EQ(done, total);
    *result = *r;
    bool ok = false;
    const std::string text = Python(kDescribe, (out_ / "model.onnx").string(), &ok);
    EXPECT_TRUE(ok) << text;
    return ok ? json::parse(text) : json();
  }

  fs::path out_;
};

TEST_F(OnnxQdqTest, Int8W8A8IsOpset13AndPassesTheChecker) {
  QuarkLayerSpecs g;
  g.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  g.weight->ch_axis = 0;
  g.input = Spec(DataType::kInt8);
  auto model = Quantize(g);
  ASSERT_NE(model, nullptr);
  OnnxQdqExportResult r;
  const json d = Describe(*model, &r);
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(r.opset, 13);
  EXPECT_EQ(d["ir_version"], 7);
  EXPECT_EQ(d["opset"], json::parse(R"([["", 13]])"));
  // Optimum's and onnxruntime-genai's decoder-with-past layout.
  json inputs = {"input_ids", "attention_mask", "position_ids"};
  json outputs = {"logits"};
  for (int i = 0; i < 5; ++i) {
    for (const char* kind : {"key", "value"}) {
      inputs.push_back("past_key_values." + std::to_string(i) + "." + kind);
      outputs.push_back("present." + std::to_string(i) + "." + kind);
    }
  }
  EXPECT_EQ(d["inputs"], inputs);
  EXPECT_EQ(d["outputs"], outputs);
  EXPECT_EQ(d["input_shapes"]["past_key_values.3.value"],
            json::parse(R"(["batch", 4, "past_sequence_length", 8])"));
  EXPECT_EQ(d["output_shapes"]["present.0.key"],
            json::parse(R"(["batch", 4, "total_sequence_length", 8])"));
  EXPECT_EQ(d["input_shapes"]["attention_mask"],
            json::parse(R"(["batch", "total_sequence_length"])"));
  // 5 blocks x 7 linears: one Q/DQ pair per input, one DQ per weight.
  EXPECT_EQ(d["ops"]["QuantizeLinear"], 35);
  EXPECT_EQ(d["ops"]["DequantizeLinear"], 70);
  const json& w = d["inits"]["model.layers.0.self_attn.q_proj.weight"];
  EXPECT_EQ(w[0], 3);               // INT8
  EXPECT_EQ(w[1], json({64, 64}));  // [in, out]
  EXPECT_EQ(d["inits"]["model.layers.0.mlp.down_proj.weight"][1], json({172, 64}));
  ASSERT_TRUE(d["inits"].contains("/model.layers.0.self_attn.q_proj/input_scale"));
  EXPECT_EQ(d["inits"]["/model.layers.0.self_attn.q_proj/input_scale"][1], json::array());
  // The stored per-channel scales are the job's.
  auto qp = model->WeightQParams("model.layers.0.self_attn.q_proj");
  ASSERT_TRUE(qp.ok());
  ASSERT_TRUE(d["q_proj_scale"].is_array()) << d["q_proj_scale"];
  ASSERT_EQ(d["q_proj_scale"].size(), 64u);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(d["q_proj_scale"][i].get<float>(), qp->scale[i].item<float>()) << i;

  bool ok = false;
  const std::string checked = Python(kCheck, (out_ / "model.onnx").string(), &ok);
  EXPECT_TRUE(ok) << checked;
  EXPECT_EQ(checked.rfind("checked", 0), 0u) << checked;
  EXPECT_EQ(r.artifact.format, ExportFormat::kOnnxQdq);
  std::vector<std::string> files;
  for (const ArtifactFile& f : r.artifact.files) files.push_back(f.path);
  EXPECT_EQ(files, (std::vector<std::string>{"NOTICE.md", "genai_config.json", "model.onnx",
                                             "tokenizer.model"}));
  // genai_config.json names the graph's inputs and outputs and its shape.
  std::ifstream in(out_ / "genai_config.json");
  const json genai = json::parse(in);
  const json& dec = genai["model"]["decoder"];
  EXPECT_EQ(dec["filename"], "model.onnx");
  EXPECT_EQ(dec["inputs"]["past_key_names"], "past_key_values.%d.key");
  EXPECT_EQ(dec["outputs"]["present_value_names"], "present.%d.value");
  EXPECT_EQ(dec["num_hidden_layers"], 5);
  EXPECT_EQ(dec["num_key_value_heads"], 4);
  EXPECT_EQ(dec["head_size"], 8);
  EXPECT_EQ(dec["hidden_size"], 64);
  EXPECT_EQ(genai["model"]["type"], "llama");
  EXPECT_EQ(genai["model"]["bos_token_id"], 1);
  EXPECT_EQ(genai["model"]["eos_token_id"], 2);
  EXPECT_EQ(genai["model"]["vocab_size"], 512);
  EXPECT_EQ(genai["search"]["do_sample"], false);
}

TEST_F(OnnxQdqTest, Fp8IsOpset19AndInt4PerGroupOpset21) {
  QuarkLayerSpecs fp8;
  fp8.weight = Spec(DataType::kFp8E4M3);
  fp8.input = Spec(DataType::kFp8E4M3);
  auto model = Quantize(fp8, Spec(DataType::kFp8E4M3));
  ASSERT_NE(model, nullptr);
  OnnxQdqExportResult r;
  json d = Describe(*model, &r);
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(r.opset, 19);
  EXPECT_EQ(d["ir_version"], 9);
  EXPECT_EQ(d["inits"]["model.layers.0.self_attn.q_proj.weight"][0], 17);  // FLOAT8E4M3FN
  // Inputs of 35 linears and the outputs of 10 k/v projections (FP8 KV
  // cache), each as x / scale -> Cast to FP8 -> Cast back -> * scale.
  EXPECT_EQ(d["ops"].value("QuantizeLinear", 0), 0);
  EXPECT_EQ(d["ops"]["Cast"], 2 * 45);
  EXPECT_EQ(d["ops"]["Div"], 45);
  EXPECT_EQ(d["inits"]["/model.layers.2.self_attn.k_proj/output_scale"], json::parse("[1, []]"));
  EXPECT_EQ(d["cast_to"]["/model.layers.2.self_attn.k_proj/output/QuantizeCast"], 17);

  QuarkLayerSpecs int4;
  int4.weight = Spec(DataType::kUInt4, QScheme::kPerGroup, 4, /*symmetric=*/false);
  model = Quantize(int4);
  ASSERT_NE(model, nullptr);
  d = Describe(*model, &r);
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(r.opset, 21);
  EXPECT_EQ(d["ir_version"], 10);
  EXPECT_EQ(d["inits"]["model.layers.0.mlp.down_proj.weight"], json::parse("[21, [172, 64]]"));
  EXPECT_EQ(d["inits"]["model.layers.0.mlp.down_proj.weight_scale"][1], json({43, 64}));
  EXPECT_EQ(d["inits"]["model.layers.0.mlp.down_proj.weight_zero_point"][0], 21);
  EXPECT_EQ(d["ops"].value("QuantizeLinear", 0), 0);
}

// 4-bit blocks of 32 along the inputs become onnxruntime's MatMulNBits with
// float32 arithmetic (accuracy_level 1); down_proj (172 inputs) stays float.
TEST_F(OnnxQdqTest, Int4Blocks32AreMatMulNBits) {
  QuarkLayerSpecs int4;
  int4.weight = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
  auto model = Quantize(int4, {}, {"lm_head", "*down_proj"});
  ASSERT_NE(model, nullptr);
  OnnxQdqExportResult r;
  const json d = Describe(*model, &r);
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(d["opset"], json::parse(R"([["", 13], ["com.microsoft", 1]])"));
  EXPECT_EQ(d["ops"]["MatMulNBits"], 6 * 5);
  EXPECT_EQ(d["ops"].value("DequantizeLinear", 0), 0);
  // B [N, K / 32, 16], scales [N * K / 32], zero points one byte per row.
  EXPECT_EQ(d["inits"]["model.layers.0.self_attn.q_proj.weight_nbits"],
            json::parse("[2, [64, 2, 16]]"));
  EXPECT_EQ(d["inits"]["model.layers.0.self_attn.q_proj.weight_scale"], json::parse("[1, [128]]"));
  EXPECT_EQ(d["inits"]["model.layers.0.self_attn.q_proj.weight_zero_point"],
            json::parse("[2, [64]]"));
  EXPECT_EQ(d["inits"]["model.layers.0.mlp.down_proj.weight"], json::parse("[1, [172, 64]]"));
  const json& attrs = d["node_attrs"]["/model.layers.0.mlp.up_proj/MatMulNBits"];
  EXPECT_EQ(attrs, json::parse(
                       R"({"K": 64, "N": 172, "bits": 4, "block_size": 32, "accuracy_level": 1})"));
}

TEST_F(OnnxQdqTest, RefusesMxAndDynamicActivations) {
  QuarkLayerSpecs mx;
  mx.weight = Spec(DataType::kMxFp4);
  auto model = Quantize(mx);
  ASSERT_NE(model, nullptr);
  OnnxQdqExportOptions o;
  o.output_dir = out_.string();
  auto r = ExportOnnxQdq(*model, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("onnx_qdq cannot express mxfp4"), std::string::npos)
      << r.status();
  QuarkLayerSpecs dyn;
  dyn.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  dyn.input = Spec(DataType::kInt8, QScheme::kPerChannel);
  dyn.input->is_dynamic = true;
  dyn.input->ch_axis = 1;
  model = Quantize(dyn);
  ASSERT_NE(model, nullptr);
  r = ExportOnnxQdq(*model, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("dynamic"), std::string::npos) << r.status();
  EXPECT_FALSE(fs::exists(out_));
}

// The wire format: a varint, a fixed32 float and nested messages decode as
// protobuf defines them.
TEST(OnnxProto, WireFormat) {
  onnx::ProtoWriter w;
  w.Varint(1, 300);  // tag 0x08, 0xAC 0x02
  w.Float(2, 1.0f);  // tag 0x15, 00 00 80 3F
  w.Int64(3, -1);    // ten-byte varint
  onnx::ProtoWriter inner;
  inner.Bytes(1, "ab");
  w.Message(4, inner);  // tag 0x22, len 4, 0x0A 0x02 'a' 'b'
  const std::string want = std::string("\x08\xAC\x02\x15\x00\x00\x80\x3F", 8) +
                           std::string("\x18\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01", 11) +
                           std::string(
                               "\x22\x04\x0A\x02"
                               "ab",
                               6);
  EXPECT_EQ(w.data(), want);
}

}  // namespace
}  // namespace quantd::exporter
