#include "worker/torchscript/script_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "worker/algo/gptq.h"
#include "worker/common/cancellation.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant_modules/quant_conv.h"
#include "worker/torchscript/batchnorm_fold.h"
#include "worker/torchscript/script_export.h"
#include "worker/torchscript/script_gptq.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/testdata/test_modules.h"

namespace quantd::torchscript {
namespace {

using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

QuantSpec Int8(QScheme scheme, bool dynamic = false) {
  QuantSpec s;
  s.dtype = DataType::kInt8;
  s.qscheme = scheme;
  s.is_dynamic = dynamic;
  return s;
}

ScriptModel Load(const std::string& name) {
  auto m = ScriptModel::Load(TestModule(name));
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

TEST(ScriptModelTest, FindsTheQuantizableLayersByQualifiedName) {
  for (const char* file : {"conv_bn_scripted.pt", "conv_bn_traced.pt"}) {
    ScriptModel m = Load(file);
    std::vector<std::string> names, types;
    for (const auto& l : m.Layers()) {
      names.push_back(l.name);
      types.push_back(l.type);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"block1.conv", "block2.conv", "up", "fc"})) << file;
    EXPECT_EQ(types, (std::vector<std::string>{"Conv2d", "Conv2d", "ConvTranspose2d", "Linear"}));
    EXPECT_EQ(m.num_inputs(), 1);
  }
  ScriptModel two = Load("two_inputs.pt");
  EXPECT_EQ(two.num_inputs(), 3);
  std::vector<std::string> types;
  for (const auto& l : two.Layers()) types.push_back(l.type);
  EXPECT_EQ(types, (std::vector<std::string>{"EmbeddingBag", "Embedding", "Linear"}));
}

TEST(ScriptModelTest, HostileModulesAreRefusedNamingWhy) {
  // A loop that never ends stops at the iteration budget, or at a cancel.
  ScriptLimits few;
  few.max_loop_iterations = 1000;
  auto loop = ScriptModel::Load(TestModule("while_loop.pt"), few);
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto ran = loop->Forward({at::ones({1, 4})});
  EXPECT_EQ(ran.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ran.status().message().find("more than 1000 loop iterations"), std::string::npos)
      << ran.status();
  {
    auto endless = ScriptModel::Load(TestModule("while_loop.pt"));
    ASSERT_TRUE(endless.ok());
    int checks = 0;
    CancellationScope cancel([&checks] { return ++checks > 50; });
    auto cancelled = endless->Forward({at::ones({1, 4})});
    EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled) << cancelled.status();
  }
  auto file = ScriptModel::Load(TestModule("reads_a_file.pt"));
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("aten::from_file"), std::string::npos) << file.status();

  // Not a zip; a truncated archive; a directory; a missing file; over the size cap.
  const std::string junk = TempDir() + "/junk.pt";
  std::ofstream(junk) << "not a model";
  EXPECT_EQ(ScriptModel::Load(junk).status().code(), StatusCode::kInvalidArgument);
  std::ifstream in(TestModule("conv_bn_scripted.pt"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t cut : {size_t{10}, bytes.size() / 2, bytes.size() - 30}) {
    const std::string truncated = TempDir() + "/truncated.pt";
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, cut);
    auto t = ScriptModel::Load(truncated);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << cut << " " << t.status();
  }
  EXPECT_EQ(ScriptModel::Load(TempDir()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ScriptModel::Load(TempDir() + "/none.pt").status().code(), StatusCode::kNotFound);
  ScriptLimits small;
  small.max_file_bytes = 1000;
  auto big = ScriptModel::Load(TestModule("conv_bn_scripted.pt"), small);
  EXPECT_NE(big.status().message().find("over the TorchScript limit"), std::string::npos);

  // A frozen module has no submodules left to quantize.
  ScriptModel frozen = Load("frozen.pt");
  auto q = ScriptQuantizer::Create(frozen, [](const std::string&, const std::string&) {
    pipeline::LayerPlan p;
    p.weight = Int8(QScheme::kPerChannel);
    return p;
  });
  EXPECT_EQ(q.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(q.status().message().find("torch.jit.freeze"), std::string::npos);
}

TEST(BatchNormFoldTest, FoldsEveryInstanceAndKeepsTheOutputs) {
  for (const char* file : {"conv_bn_scripted.pt", "conv_bn_traced.pt"}) {
    ScriptModel unfolded = Load(file);
    const at::Tensor x = at::rand({5, 1, 8, 8}, at::TensorOptions().dtype(at::kFloat));
    auto before = unfolded.Forward({x});
    ASSERT_TRUE(before.ok()) << before.status();
    // LibTorch keeps what it compiled at the first forward: folding after it is refused.
    EXPECT_EQ(FoldBatchNorms(unfolded).status().code(), StatusCode::kFailedPrecondition);
    ScriptModel m = Load(file);
    auto report = FoldBatchNorms(m);
    ASSERT_TRUE(report.ok()) << report.status();
    // block2.conv has no bias (a traced one passes None): it gets one.
    EXPECT_EQ(report->folded,
              (std::vector<std::string>{"block1.conv <- block1.bn", "block2.conv <- block2.bn"}))
        << file;
    EXPECT_TRUE(report->skipped.empty()) << file << ": " << report->skipped.front();
    auto after = m.Forward({x});
    ASSERT_TRUE(after.ok()) << after.status();
    // Folding rounds each weight once to float32 (relative 2^-24) and
    // reorders the arithmetic: outputs agree to a few float32 ulps of
    // their size.
    const double scale = before->abs().max().item<double>();
    EXPECT_LT((*after - *before).abs().max().item<double>(), 1e-5 * scale) << file;
    // The batch norms are gone from the graph: changing their statistics
    // no longer changes anything.
    m.module().attr("block1").toModule().attr("bn").toModule().setattr("running_mean",
                                                                       at::full({4}, 100.0));
    EXPECT_TRUE(at::equal(*m.Forward({x}), *after));
    // The scale went into the weights.
    auto conv_weight = [](ScriptModel& model) {
      return model.module()
          .attr("block1")
          .toModule()
          .attr("conv")
          .toModule()
          .attr("weight")
          .toTensor();
    };
    EXPECT_FALSE(at::equal(conv_weight(m), conv_weight(unfolded)));
  }
}

// Conv2d (groups 2, stride 2, padding 1, dilation 2) and ConvTranspose2d
// (output padding) in a module: the quantized forward through the hooks is
// quant_modules::QuantConv's, bit for bit (that one is checked against a
// float64 reference in quant_modules_test).
TEST(ScriptQuantizerTest, QuantizedForwardIsTheQuantModulesForward) {
  for (const auto& [file, kind] :
       {std::pair{"single_conv.pt", quant_modules::ConvKind::kConv2d},
        std::pair{"single_conv_transpose.pt", quant_modules::ConvKind::kConvTranspose2d}}) {
    ScriptModel m = Load(file);
    pipeline::LayerPlan plan;
    plan.weight = Int8(QScheme::kPerChannel);
    plan.input = Int8(QScheme::kPerTensor);
    plan.output = Int8(QScheme::kPerTensor, /*dynamic=*/true);
    auto q =
        ScriptQuantizer::Create(m, [&](const std::string&, const std::string&) { return plan; });
    ASSERT_TRUE(q.ok()) << q.status();
    std::vector<at::Tensor> batches = {at::randn({3, 4, 9, 9}), at::randn({2, 4, 9, 9}) * 2};
    for (const auto& b : batches) {
      ASSERT_TRUE((*q)->Forward(ScriptQuantizer::Mode::kObserve, {b}).ok());
    }
    ASSERT_TRUE((*q)->FinishCalibration().ok());

    torch::jit::Module layer = m.module().attr("layer").toModule();
    const at::Tensor w = (*q)->layers()[0].float_weight;
    const at::Tensor bias = (*q)->layers()[0].float_bias.toTensor();
    quant_modules::ConvOptions o;
    o.stride = {2, 2};
    o.padding = {1, 1};
    o.groups = 2;
    if (kind == quant_modules::ConvKind::kConv2d) {
      o.dilation = {2, 2};
    } else {
      o.output_padding = {1, 1};
    }
    auto ref = quant_modules::QuantConv::Create(kind, "layer", w, bias, o, plan);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE((*ref)->Calibrate(batches).ok());

    const at::Tensor x = at::randn({2, 4, 9, 9}) * 1.5;
    auto got = (*q)->Forward(ScriptQuantizer::Mode::kQuantized, {x});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = (*ref)->Forward(x);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_TRUE(at::equal(*got, *want)) << file;
    // And the float mode is the untouched module.
    auto f = (*q)->Forward(ScriptQuantizer::Mode::kFloat, {x});
    EXPECT_FALSE(at::equal(*f, *got));
    EXPECT_TRUE(at::allclose(*f, *got, 0.1, 0.1));
  }
}

// GPTQ on a Conv2d is GptqQuantizeWeight on its [out, in * kh * kw] matrix
// with the Hessian of its unfolded inputs, for scripted and traced modules
// alike; the transposed convolution keeps round-to-nearest, saying why.
TEST(ScriptGptqTest, AConvolutionIsFittedOnItsUnfoldedInputs) {
  for (const char* file : {"conv_bn_scripted.pt", "conv_bn_traced.pt"}) {
    ScriptModel m = Load(file);
    QuantSpec w4 = Int8(QScheme::kPerChannel);
    w4.dtype = DataType::kInt4;
    auto q = ScriptQuantizer::Create(m, [&](const std::string&, const std::string&) {
      pipeline::LayerPlan p;
      p.weight = w4;
      return p;
    });
    ASSERT_TRUE(q.ok()) << q.status();
    at::manual_seed(0);
    TensorDataset data;
    data.inputs = {at::randn({16, 1, 8, 8})};
    ScriptGptqOptions o;
    o.batch_size = 16;
    auto report = RunScriptGptq(**q, data, o);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->fitted.size(), 3u) << file;  // block1.conv, block2.conv, fc
    ASSERT_EQ(report->rounded.size(), 1u);
    EXPECT_EQ(report->rounded[0], "up: GPTQ fits Linear and Conv2d weights");

    // block1.conv comes first: its inputs are the dataset's.
    const QuantizedLayer& conv = (*q)->layers()[0];
    ASSERT_EQ(conv.layer.name, "block1.conv");
    algo::HessianAccumulator h(9);
    ASSERT_TRUE(
        h.Add(at::im2col(data.inputs[0], {3, 3}, {1, 1}, {1, 1}, {1, 1}).transpose(1, 2)).ok());
    auto want = algo::GptqQuantizeWeight(conv.float_weight.reshape({4, 9}), h.hessian(), w4);
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = conv.weight.Effective(at::kFloat, at::kCPU);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(at::equal(*got, want->weight.reshape({4, 1, 3, 3}))) << file;
    // GPTQ moved weights off their rounded-to-nearest values (block2.conv's
    // 36 columns; the 9 of block1.conv may all stay).
    const QuantizedLayer& conv2 = (*q)->layers()[1];
    auto rtn =
        quant::FakeQuantize(conv2.float_weight, w4, *quant::ComputeQParams(conv2.float_weight, w4));
    EXPECT_FALSE(at::equal(*conv2.weight.Effective(at::kFloat, at::kCPU), *rtn)) << file;
  }
}

TEST(ScriptExportTest, TheExportedModuleRunsWithoutQuantdAndGivesTheSameOutputs) {
  ScriptModel m = Load("conv_bn_scripted.pt");
  ASSERT_TRUE(FoldBatchNorms(m).ok());
  auto q = ScriptQuantizer::Create(m, [](const std::string& name, const std::string&) {
    pipeline::LayerPlan p;
    p.weight = Int8(QScheme::kPerChannel);
    p.input = Int8(QScheme::kPerTensor);
    if (name == "fc") p.output = Int8(QScheme::kPerTensor);
    return p;
  });
  ASSERT_TRUE(q.ok()) << q.status();
  const at::Tensor cal = at::rand({16, 1, 8, 8});
  ASSERT_TRUE((*q)->Forward(ScriptQuantizer::Mode::kObserve, {cal}).ok());
  ASSERT_TRUE((*q)->FinishCalibration().ok());
  const at::Tensor x = at::rand({6, 1, 8, 8});
  auto want = (*q)->Forward(ScriptQuantizer::Mode::kQuantized, {x});
  ASSERT_TRUE(want.ok()) << want.status();

  ScriptExportOptions eo;
  eo.output_dir = TempDir() + "/export";
  auto artifact = ExportScriptModel(**q, eo);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(artifact->format, exporter::ExportFormat::kTorchScript);
  // No quantd operator is left in its code (PyTorch without quantd loads it).
  std::ifstream archive(eo.output_dir + "/model.pt", std::ios::binary);
  const std::string archived((std::istreambuf_iterator<char>(archive)), {});
  EXPECT_EQ(archived.find("ops.quantd"), std::string::npos);
  torch::jit::Module loaded = torch::jit::load(eo.output_dir + "/model.pt");
  const at::Tensor got = loaded.forward({x}).toTensor();
  EXPECT_TRUE(at::equal(got, *want)) << (got - *want).abs().max();

  // Dynamic or FP8 activations have no PyTorch operator: refused up front,
  // naming every such quantizer.
  ScriptModel m2 = Load("conv_bn_scripted.pt");
  auto dyn = ScriptQuantizer::Create(m2, [](const std::string&, const std::string&) {
    pipeline::LayerPlan p;
    p.input = Int8(QScheme::kPerTensor, /*dynamic=*/true);
    return p;
  });
  ASSERT_TRUE(dyn.ok());
  Status s = CheckScriptExport(**dyn);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // block1.conv, block2.conv, up and fc take float inputs.
  EXPECT_EQ(s.violations().size(), 4u) << s;
}

}  // namespace
}  // namespace quantd::torchscript
