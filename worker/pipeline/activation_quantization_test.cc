// Activation quantization through whole jobs on stories260K: the dynamic and
// static strategies, the FP8 KV cache and the accuracy gate; and the static
// calibration of one block against a float64 reference observer.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "gtest/gtest.h"
#include "worker/models/registry.h"
#include "worker/pipeline/activation_quantizers.h"
#include "worker/pipeline/quantization_job.h"

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

QuantSpec Spec(DataType dtype, QScheme scheme, bool dynamic = false, std::optional<int> axis = {}) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = scheme;
  s.is_dynamic = dynamic;
  s.ch_axis = axis;
  return s;
}

// Weights and inputs of every decoder-block linear.
LayerPlanner WeightsAndInputs(QuantSpec weight, std::optional<QuantSpec> input,
                              std::optional<QuantSpec> output = {}) {
  return [=](const std::string& name, const std::string&) {
    LayerPlan p;
    if (name.rfind("model.layers.", 0) != 0) return p;
    p.weight = weight;
    p.input = input;
    p.output = output;
    return p;
  };
}

class ActivationQuantizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("actq_" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  JobOptions Options(LayerPlanner planner, const std::string& name) {
    JobOptions o;
    o.model_dir = "models/stories260K";
    o.planner = std::move(planner);
    o.quantization_description = name;
    o.calibration.dataset_path = "tests/data/tinyshakespeare.txt";
    o.calibration.num_samples = 8;
    o.calibration.seq_len = 256;
    o.evaluation.dataset_path = "tests/data/tinystories-sample.txt";
    o.evaluation.n_ctx = 256;
    o.evaluation.max_windows = 40;
    o.export_options.output_dir = (root_ / name / "out").string();
    o.scratch_dir = (root_ / name / "scratch").string();
    return o;
  }

  static double Increase(const JobReport& r) {
    return r.quantized_perplexity->ppl / r.float_perplexity->ppl - 1;
  }

  fs::path root_;
};

class NullObserver : public JobObserver {
 public:
  void OnProgress(const ProgressInfo&) override {}
  void OnLog(LogLevel, const std::string&) override {}
  void OnBlock(const BlockReport& b) override { blocks.push_back(b); }
  std::vector<BlockReport> blocks;
};

TEST_F(ActivationQuantizationTest, DynamicStaticAndMxStrategiesStayCloseToFloat) {
  struct Case {
    std::string name;
    LayerPlanner planner;
    double max_increase;
  };
  const QuantSpec int8_channel = Spec(DataType::kInt8, QScheme::kPerChannel, false, 0);
  const QuantSpec fp8 = Spec(DataType::kFp8E4M3, QScheme::kPerTensor);
  const QuantSpec mxfp8 = Spec(DataType::kMxFp8E4M3, QScheme::kPerGroup, false, -1);
  std::vector<Case> cases = {
      // w_int8_a_int8_per_token_dynamic
      {"int8_per_token_dynamic",
       WeightsAndInputs(int8_channel, Spec(DataType::kInt8, QScheme::kPerChannel, true, 1)), 0.02},
      // w_fp8_a_fp8 (static per-tensor activations)
      {"fp8_static", WeightsAndInputs(fp8, fp8), 0.02},
      // w_mxfp8_a_mxfp8 (MX activations are dynamic by construction)
      {"mxfp8", WeightsAndInputs(mxfp8, Spec(DataType::kMxFp8E4M3, QScheme::kPerGroup, true, -1)),
       0.02},
  };
  for (auto& c : cases) {
    NullObserver obs;
    JobOutcome out = RunQuantizationJob(Options(c.planner, c.name), obs);
    ASSERT_TRUE(out.status.ok()) << c.name << ": " << out.status;
    ASSERT_TRUE(out.report.quantized_perplexity.has_value());
    const double inc = Increase(out.report);
    std::printf("%-24s float %.4f quantized %.4f (%+.3f%%) KL %.5f\n", c.name.c_str(),
                out.report.float_perplexity->ppl, out.report.quantized_perplexity->ppl, 100 * inc,
                *out.report.kl_mean);
    EXPECT_LT(std::abs(inc), c.max_increase) << c.name;
    EXPECT_GT(*out.report.kl_mean, 0) << c.name;  // activations really were quantized
    // Static inputs report their observed ranges, dynamic ones do not.
    const LayerReport& q = obs.blocks.at(0).layers.at(0);
    if (c.name == "fp8_static") {
      EXPECT_LT(q.input_min, 0);
      EXPECT_GT(q.input_max, 0);
    } else {
      EXPECT_EQ(q.input_min, 0);
      EXPECT_EQ(q.input_max, 0);
    }
    EXPECT_FALSE(q.input_format.empty());
  }
}

TEST_F(ActivationQuantizationTest, StaticAndDynamicDifferAndActivationsCostAccuracy) {
  const QuantSpec w8 = Spec(DataType::kInt8, QScheme::kPerChannel, false, 0);
  NullObserver o1, o2, o3;
  JobOutcome weight_only = RunQuantizationJob(Options(WeightsAndInputs(w8, {}), "w8"), o1);
  JobOutcome dynamic = RunQuantizationJob(
      Options(WeightsAndInputs(w8, Spec(DataType::kInt8, QScheme::kPerTensor, true)), "dyn"), o2);
  JobOutcome stat = RunQuantizationJob(
      Options(WeightsAndInputs(w8, Spec(DataType::kInt8, QScheme::kPerTensor)), "static"), o3);
  ASSERT_TRUE(weight_only.status.ok() && dynamic.status.ok() && stat.status.ok())
      << weight_only.status << dynamic.status << stat.status;
  const double w = weight_only.report.quantized_perplexity->ppl;
  const double d = dynamic.report.quantized_perplexity->ppl;
  const double s = stat.report.quantized_perplexity->ppl;
  std::printf("W8 %.4f  W8A8 dynamic %.4f  W8A8 static %.4f\n", w, d, s);
  EXPECT_NE(d, w);
  EXPECT_NE(s, w);
  EXPECT_NE(s, d);
}

TEST_F(ActivationQuantizationTest, StaticScalesEqualAFloat64ReferenceObserver) {
  auto model = models::OpenCausalLM("models/stories260K", {});
  ASSERT_TRUE(model.ok()) << model.status();
  auto block = (*model)->LoadBlock(0);
  ASSERT_TRUE(block.ok());
  at::manual_seed(7);
  const at::Tensor hidden = at::randn({3, 64, (*model)->config().hidden_size});

  std::map<std::string, LayerPlan> plans;
  const QuantSpec int8 = Spec(DataType::kInt8, QScheme::kPerTensor);
  QuantSpec fp8 = Spec(DataType::kFp8E4M3, QScheme::kPerTensor);
  for (models::Linear* l : (*block)->linears()) {
    LayerPlan p;
    p.input = int8;
    if (l->name().find("k_proj") != std::string::npos ||
        l->name().find("v_proj") != std::string::npos)
      p.output = fp8;
    plans[l->name()] = p;
  }
  // The reference: float64 max |x| of every tensor each linear sees.
  std::map<std::string, double> in_amax, out_amax;
  for (models::Linear* l : (*block)->linears()) {
    const std::string n = l->name();
    l->AddInputHook([&in_amax, n](const models::Linear&, const at::Tensor& t) {
      in_amax[n] = std::max(in_amax[n], t.to(at::kDouble).abs().max().item<double>());
      return t;
    });
    l->AddOutputHook([&out_amax, n](const models::Linear&, const at::Tensor& t) {
      out_amax[n] = std::max(out_amax[n], t.to(at::kDouble).abs().max().item<double>());
      return t;
    });
  }
  KvCacheOptions kv;
  auto params = CalibrateBlockActivations(**block, hidden, plans, kv);
  ASSERT_TRUE(params.ok()) << params.status();
  ASSERT_EQ(params->inputs.size(), 7u);
  for (const auto& [name, qp] : params->inputs) {
    // Symmetric int8: amax / ((qmax - qmin) / 2) = amax / 127.5.
    const double ref = in_amax.at(name) / 127.5;
    EXPECT_NEAR(qp.scale.item<double>(), ref, ref * 1e-6) << name;
    EXPECT_EQ(qp.zero_point.item<int>(), 0) << name;
  }
  // KV cache: FP8 e4m3 scale amax / 448, unified by max over k and v.
  ASSERT_EQ(params->outputs.size(), 2u);
  const std::string k = "model.layers.0.self_attn.k_proj", v = "model.layers.0.self_attn.v_proj";
  const double unified = std::max(out_amax.at(k), out_amax.at(v)) / 448.0;
  EXPECT_NEAR(params->outputs.at(k).scale.item<double>(), unified, unified * 1e-6);
  EXPECT_TRUE(at::equal(params->outputs.at(k).scale, params->outputs.at(v).scale));

  // min_kv_scale floors the unified scale.
  kv.min_kv_scale = 1.0f;
  auto floored = CalibrateBlockActivations(**block, hidden, plans, kv);
  ASSERT_TRUE(floored.ok());
  EXPECT_EQ(floored->outputs.at(k).scale.item<float>(), 1.0f);
  EXPECT_EQ(floored->outputs.at(v).scale.item<float>(), 1.0f);
}

TEST_F(ActivationQuantizationTest, Fp8KvCacheChangesPerplexity) {
  const QuantSpec w8 = Spec(DataType::kInt8, QScheme::kPerChannel, false, 0);
  NullObserver off_obs, on_obs;
  JobOutcome off = RunQuantizationJob(Options(WeightsAndInputs(w8, {}), "kv_off"), off_obs);
  JobOptions on_opt = Options(WeightsAndInputs(w8, {}), "kv_on");
  on_opt.kv_cache = Spec(DataType::kFp8E4M3, QScheme::kPerTensor);
  JobOutcome on = RunQuantizationJob(on_opt, on_obs);
  ASSERT_TRUE(off.status.ok() && on.status.ok()) << off.status << on.status;
  std::printf("W8 KV off %.5f  KV fp8 %.5f\n", off.report.quantized_perplexity->ppl,
              on.report.quantized_perplexity->ppl);
  EXPECT_NE(off.report.quantized_perplexity->ppl, on.report.quantized_perplexity->ppl);
  EXPECT_LT(std::abs(Increase(on.report)), 0.02);
  // The k/v projections report their FP8 output format.
  bool saw_kv = false;
  for (const auto& l : on_obs.blocks.at(0).layers)
    if (l.name.find("k_proj") != std::string::npos) saw_kv = !l.output_format.empty();
  EXPECT_TRUE(saw_kv);
}

TEST_F(ActivationQuantizationTest, StaticWithoutCalibrationDataIsRefused) {
  NullObserver obs;
  JobOptions o = Options(WeightsAndInputs(Spec(DataType::kInt8, QScheme::kPerTensor),
                                          Spec(DataType::kInt8, QScheme::kPerTensor)),
                         "nocalib");
  o.calibration.dataset_path.clear();
  JobOutcome out = RunQuantizationJob(o, obs);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status.reason(), "CALIBRATION_REQUIRED");
  EXPECT_TRUE(obs.blocks.empty());
}

TEST_F(ActivationQuantizationTest, HarshSchemeTripsTheAccuracyGateButKeepsEverything) {
  JobOptions o = Options(WeightsAndInputs(Spec(DataType::kInt2, QScheme::kPerTensor), {}), "int2");
  o.calibration.dataset_path.clear();
  o.evaluation.max_perplexity_increase = 0.25;
  o.evaluation.max_kl_divergence = 0.5;
  NullObserver obs;
  JobOutcome out = RunQuantizationJob(o, obs);
  EXPECT_EQ(out.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status.reason(), "ACCURACY_GATE");
  EXPECT_NE(out.status.message().find("perplexity rose"), std::string::npos) << out.status;
  EXPECT_NE(out.status.message().find("KL divergence"), std::string::npos) << out.status;
  ASSERT_TRUE(out.report.quantized_perplexity.has_value());
  EXPECT_GT(Increase(out.report), 0.25);
  ASSERT_EQ(out.report.artifacts.size(), 1u);
  EXPECT_FALSE(out.report.artifacts[0].accepted);
  EXPECT_TRUE(fs::exists(fs::path(out.report.artifacts[0].path) / "model.safetensors"));

  // The same job within a lenient gate is accepted.
  o.evaluation.max_perplexity_increase = 1e9;
  o.evaluation.max_kl_divergence = 1e9;
  o.export_options.overwrite = true;
  JobOutcome ok = RunQuantizationJob(o, obs);
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_TRUE(ok.report.artifacts.at(0).accepted);
}

}  // namespace
}  // namespace quantd::pipeline
