#include "worker/torchscript/script_onnx_export.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/peers/onnx_graph_edit.h"
#include "worker/torchscript/batchnorm_fold.h"
#include "worker/torchscript/script_model.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/testdata/test_modules.h"

namespace quantd::torchscript {
namespace {

using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

QuantSpec Spec(DataType dtype, QScheme scheme, bool dynamic = false) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = scheme;
  s.is_dynamic = dynamic;
  return s;
}

ScriptModel Load(const std::string& name) {
  auto m = ScriptModel::Load(TestModule(name));
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// The initializer as a float tensor (int8 codes or float32 values).
at::Tensor Values(const peers::OnnxInitializer& t) {
  const auto type = t.data_type == 3 ? at::kChar : at::kFloat;
  at::Tensor out = at::empty(t.dims, type);
  std::memcpy(out.data_ptr(), t.raw.data(), t.raw.size());
  return out.to(at::kFloat);
}

TEST(ScriptOnnxExportTest, StaticInt8ConvNetBecomesQdqNodes) {
  ScriptModel m = Load("conv_bn_scripted.pt");
  ASSERT_TRUE(FoldBatchNorms(m).ok());
  auto q = ScriptQuantizer::Create(m, [](const std::string& name, const std::string&) {
    pipeline::LayerPlan p;
    p.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
    p.input = Spec(DataType::kInt8, QScheme::kPerTensor);
    if (name == "fc") p.output = Spec(DataType::kInt8, QScheme::kPerTensor);
    return p;
  });
  ASSERT_TRUE(q.ok()) << q.status();
  const at::Tensor cal = at::rand({16, 1, 8, 8});
  ASSERT_TRUE(CheckScriptOnnxGraph(**q, {cal.slice(0, 0, 2)}).ok());
  ASSERT_TRUE((*q)->Forward(ScriptQuantizer::Mode::kObserve, {cal}).ok());
  ASSERT_TRUE((*q)->FinishCalibration().ok());

  ScriptOnnxExportOptions eo;
  eo.output_dir = std::string(std::getenv("TEST_TMPDIR")) + "/onnx";
  eo.example_inputs = {cal.slice(0, 0, 2)};
  auto r = ExportScriptOnnx(**q, eo);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->artifact.format, exporter::ExportFormat::kOnnxQdq);
  EXPECT_EQ(r->artifact.consumers, std::vector<std::string>{"onnxruntime"});
  EXPECT_EQ(r->opset, 13);
  EXPECT_TRUE(r->float_weights.empty());

  auto g = peers::OnnxGraphEditor::Parse(ReadFile(eo.output_dir + "/model.onnx"));
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> ops;
  for (const auto& n : g->Nodes()) ++ops[n.op_type];
  EXPECT_EQ(ops["Conv"], 2);
  EXPECT_EQ(ops["ConvTranspose"], 1);
  EXPECT_EQ(ops["Gemm"], 1);
  EXPECT_EQ(ops["GlobalAveragePool"], 1);
  EXPECT_EQ(ops["Relu"], 3);
  EXPECT_EQ(ops["BatchNormalization"], 0);    // folded
  EXPECT_EQ(ops["QuantizeLinear"], 5);        // four inputs and fc's output
  EXPECT_EQ(ops["DequantizeLinear"], 5 + 4);  // and the four weights

  // The weights' codes and scales dequantize to the fake-quantized weights
  // quantd evaluated: per output channel for the convolutions (axis 0), per
  // ConvTranspose2d output channel on axis 1 of its [in, out, kh, kw] weight.
  for (const QuantizedLayer& l : (*q)->layers()) {
    const std::string name = l.layer.name + ".weight";
    auto codes = g->Initializer(name);
    auto scale = g->Initializer(name + "_scale");
    ASSERT_TRUE(codes.ok() && scale.ok()) << name;
    EXPECT_EQ(codes->data_type, 3) << name;  // INT8
    const int64_t axis = l.layer.type == "ConvTranspose2d" ? 1 : 0;
    const at::Tensor c = Values(*codes);
    std::vector<int64_t> shape(c.dim(), 1);
    shape[axis] = -1;
    const at::Tensor dq = c * Values(*scale).reshape(shape);
    EXPECT_TRUE(at::equal(dq, *l.weight.Effective(at::kFloat, at::kCPU))) << name;
  }
  const auto info = nlohmann::json::parse(ReadFile(eo.output_dir + "/onnx_export.json"));
  EXPECT_EQ(info["layers"][2]["name"], "up");
  EXPECT_EQ(info["layers"][2]["input"], "int8 per_tensor sym: QuantizeLinear + DequantizeLinear");
}

TEST(ScriptOnnxExportTest, TypesWithoutAnOnnxElementTypeGoOutAsFloat) {
  ScriptModel m = Load("conv_bn_scripted.pt");
  auto q = ScriptQuantizer::Create(m, [](const std::string& name, const std::string&) {
    pipeline::LayerPlan p;
    p.weight = Spec(name == "fc" ? DataType::kInt3 : DataType::kInt4, QScheme::kPerChannel);
    return p;
  });
  ASSERT_TRUE(q.ok()) << q.status();
  ScriptOnnxExportOptions eo;
  eo.output_dir = std::string(std::getenv("TEST_TMPDIR")) + "/onnx_int3";
  eo.example_inputs = {at::rand({2, 1, 8, 8})};
  auto r = ExportScriptOnnx(**q, eo);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->opset, 21);  // int4 codes
  ASSERT_EQ(r->float_weights.size(), 1u);
  EXPECT_EQ(r->float_weights[0].rfind("fc: int3", 0), 0u) << r->float_weights[0];
  auto g = peers::OnnxGraphEditor::Parse(ReadFile(eo.output_dir + "/model.onnx"));
  ASSERT_TRUE(g.ok());
  auto fc = g->Initializer("fc.weight");
  ASSERT_TRUE(fc.ok());
  EXPECT_EQ(fc->data_type, 1);  // the fake-quantized float values
  EXPECT_TRUE(at::equal(Values(*fc), *(*q)->layers()[3].weight.Effective(at::kFloat, at::kCPU)));
  EXPECT_EQ(g->Initializer("up.weight")->data_type, 22);  // INT4
}

TEST(ScriptOnnxExportTest, RefusesWhatOnnxCannotExpressNamingIt) {
  // An operator outside the table, named with the submodule it runs in.
  ScriptModel m = Load("unsupported_op.pt");
  auto q = ScriptQuantizer::Create(m, [](const std::string&, const std::string&) {
    pipeline::LayerPlan p;
    p.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
    return p;
  });
  ASSERT_TRUE(q.ok()) << q.status();
  Status s = CheckScriptOnnxGraph(**q, {at::rand({2, 4})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "onnx cannot express aten::cumsum (in head)");

  // Dynamic activation quantizers have no QuantizeLinear form: every layer
  // named.
  ScriptModel m2 = Load("conv_bn_scripted.pt");
  auto dyn = ScriptQuantizer::Create(m2, [](const std::string&, const std::string&) {
    pipeline::LayerPlan p;
    p.input = Spec(DataType::kInt8, QScheme::kPerTensor, /*dynamic=*/true);
    return p;
  });
  ASSERT_TRUE(dyn.ok());
  Status d = CheckScriptOnnxQuantizers(**dyn);
  EXPECT_EQ(d.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.violations().size(), 4u) << d;
  EXPECT_NE(d.message().find("block1.conv input"), std::string::npos) << d;
}

TEST(ScriptOnnxExportTest, GroupedDilatedAndTransposedConvolutions) {
  for (const char* file : {"single_conv.pt", "single_conv_transpose.pt"}) {
    ScriptModel m = Load(file);
    auto q = ScriptQuantizer::Create(m, [](const std::string&, const std::string&) {
      pipeline::LayerPlan p;
      p.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
      return p;
    });
    ASSERT_TRUE(q.ok()) << q.status();
    ScriptOnnxExportOptions eo;
    eo.output_dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + file;
    eo.example_inputs = {at::rand({2, 4, 9, 9})};
    auto r = ExportScriptOnnx(**q, eo);
    ASSERT_TRUE(r.ok()) << file << ": " << r.status();
    auto g = peers::OnnxGraphEditor::Parse(ReadFile(eo.output_dir + "/model.onnx"));
    ASSERT_TRUE(g.ok());
    std::vector<std::string> ops;
    for (const auto& n : g->Nodes()) ops.push_back(n.op_type);
    EXPECT_EQ(ops,
              (std::vector<std::string>{
                  "DequantizeLinear",
                  std::string(file) == "single_conv.pt" ? "Conv" : "ConvTranspose", "Identity"}))
        << file;
  }
}

}  // namespace
}  // namespace quantd::torchscript
