#include "worker/pipeline/block_step.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "worker/models/registry.h"
#include "worker/pipeline/job_metrics.h"
#include "worker/pipeline/pipeline_quantized_model.h"
#include "worker/pipeline/weight_quantizer.h"
#include "worker/quant/fake_quant.h"

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;

quant::QuantSpec Int8PerChannel() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt8;
  s.qscheme = quant::QScheme::kPerChannel;
  s.ch_axis = 0;
  s.symmetric = true;
  return s;
}

class CancelObserver : public JobObserver {
 public:
  bool CancelRequested() const override { return cancel; }
  bool cancel = false;
};

// Quantizes q_proj itself (to int4, which RTN here never uses) and records
// what it did, as GPTQ does; or fails with `error`.
class FakeAlgorithm : public BlockAlgorithm {
 public:
  const char* name() const override { return "fake"; }
  Status Apply(BlockAlgorithmContext& ctx) override {
    if (!error.ok()) return error;
    models::Linear* q = ctx.block.FindLinear(kQ);
    quant::QuantSpec int4 = Int8PerChannel();
    int4.dtype = quant::DataType::kInt4;
    QD_ASSIGN_OR_RETURN(quant::QParams qp, quant::ComputeQParams(q->weight(), int4));
    ctx.float_weights[kQ] = q->weight().clone();
    QD_ASSIGN_OR_RETURN(q->weight(), quant::FakeQuantize(q->weight(), int4, qp));
    ctx.quantized_weights[kQ] = qp;
    return OkStatus();
  }
  static constexpr char kQ[] = "model.layers.0.self_attn.q_proj";
  Status error;
};

// Block 0 of stories260K, every linear int8 per channel.
class BlockStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) / ("step_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    auto model = models::OpenCausalLM("models/stories260K", {});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto scratch = ScratchStore::Create(dir_);
    ASSERT_TRUE(scratch.ok());
    scratch_ = std::move(*scratch);
    const quant::QuantSpec spec = Int8PerChannel();
    opt_.planner = [spec](const std::string&, const std::string&) {
      LayerPlan p;
      p.weight = spec;
      return p;
    };
    auto block = model_->LoadBlock(0);
    ASSERT_TRUE(block.ok());
    for (models::Linear* l : (*block)->linears()) plans_[l->name()] = opt_.planner(l->name(), "");
    at::manual_seed(5);
    hidden_ = at::randn({2, 16, model_->config().hidden_size});
  }
  void TearDown() override { fs::remove_all(dir_); }

  BlockStep Step() { return BlockStep(opt_, *model_, plans_, kv_, act_, *scratch_, obs_); }
  BlockWork Loaded(const BlockStep& step) {
    BlockWork w = step.Begin(0, 5);
    w.block = *model_->LoadBlock(0);
    return w;
  }

  std::string dir_;
  std::unique_ptr<models::CausalLM> model_;
  std::unique_ptr<ScratchStore> scratch_;
  JobOptions opt_;
  std::map<std::string, LayerPlan> plans_;
  KvCacheOptions kv_;
  ActivationParams act_;
  CancelObserver obs_;
  at::Tensor hidden_;
};

TEST_F(BlockStepTest, RoundingMatchesTheReferenceFakeQuantization) {
  const BlockStep step = Step();
  BlockWork w = Loaded(step);
  ASSERT_TRUE(step.RoundWeights(w).ok());
  EXPECT_EQ(w.report.block, 1);
  EXPECT_EQ(w.report.block_count, 5);
  ASSERT_EQ(w.report.layers.size(), 7u);
  auto reference = model_->LoadBlock(0);
  ASSERT_TRUE(reference.ok());
  for (models::Linear* l : (*reference)->linears()) {
    auto qp = quant::ComputeQParams(l->weight(), Int8PerChannel());
    ASSERT_TRUE(qp.ok());
    auto fq = quant::FakeQuantize(l->weight(), Int8PerChannel(), *qp);
    ASSERT_TRUE(fq.ok());
    EXPECT_TRUE(at::equal(w.block->FindLinear(l->name())->weight(), *fq)) << l->name();
  }
  for (const LayerReport& lr : w.report.layers) {
    EXPECT_EQ(lr.weight_format, "int8 per_channel(axis 0) sym");
    EXPECT_GT(lr.weight_sqnr_db, 30) << lr.name;
    EXPECT_LT(lr.weight_sqnr_db, 60) << lr.name;
  }
  // Each weight and its scale (and zero point, when computed) are kept;
  // the block's norms are not (no transform, no algorithm).
  int weights = 0, scales = 0;
  for (const auto& [name, t] : w.tensors) {
    weights += name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    scales += name.rfind("__quantd__/", 0) == 0 && name.find(".weight_scale") != std::string::npos;
  }
  EXPECT_EQ(weights, 7);
  EXPECT_EQ(scales, 7);
  // q/o 64x64, k/v 32x64, gate/up 172x64, down 64x172: one byte per weight
  // and a float32 scale per row (600 rows), against float32.
  const int64_t numel = 2 * 64 * 64 + 2 * 32 * 64 + 3 * 64 * 172;
  EXPECT_EQ(w.bytes_delta, (numel + 4 * 600) - 4 * numel);
}

TEST_F(BlockStepTest, AlgorithmQuantizedWeightsAreNotRoundedAgain) {
  auto algo = std::make_shared<FakeAlgorithm>();
  opt_.block_algorithms = {algo};
  const BlockStep step = Step();
  BlockWork w = Loaded(step);
  ASSERT_TRUE(step.RunAlgorithms(w, hidden_).ok());
  ASSERT_EQ(w.algorithm_qparams.count(FakeAlgorithm::kQ), 1u);
  const at::Tensor by_algorithm = w.block->FindLinear(FakeAlgorithm::kQ)->weight().clone();
  ASSERT_TRUE(step.RoundWeights(w).ok());
  EXPECT_TRUE(at::equal(w.block->FindLinear(FakeAlgorithm::kQ)->weight(), by_algorithm));
  for (const LayerReport& lr : w.report.layers) {
    if (lr.name == FakeAlgorithm::kQ)
      EXPECT_LT(lr.weight_sqnr_db, 30) << "int4's SQNR against the float weight";
    else
      EXPECT_GT(lr.weight_sqnr_db, 30) << lr.name << ": int8";
  }
  bool scale_kept = false;
  for (const auto& [name, t] : w.tensors) {
    if (name != WeightScaleKey(FakeAlgorithm::kQ)) continue;
    scale_kept = at::equal(t, w.algorithm_qparams[FakeAlgorithm::kQ].scale);
  }
  EXPECT_TRUE(scale_kept) << "the algorithm's parameters, not recomputed ones";
  // With an algorithm every tensor of the block is kept (norms absorb
  // scales), the norms included.
  std::set<std::string> kept;
  for (const auto& [name, t] : w.tensors) kept.insert(name);
  int norms = 0;
  for (auto& [name, t] : w.block->NamedTensors()) {
    EXPECT_EQ(kept.count(name), 1u) << name;
    norms += name.find("norm") != std::string::npos;
  }
  EXPECT_EQ(norms, 2);
}

TEST_F(BlockStepTest, AlgorithmErrorsNameTheAlgorithmAndBlockAndCancelsKeepTheirMessage) {
  auto algo = std::make_shared<FakeAlgorithm>();
  opt_.block_algorithms = {algo};
  const BlockStep step = Step();
  algo->error = InvalidArgumentError("boom");
  BlockWork w = Loaded(step);
  Status s = step.RunAlgorithms(w, hidden_);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "fake, block 1: boom");
  algo->error = Status(StatusCode::kCancelled, "stopped in column 9", "");
  s = step.RunAlgorithms(w, hidden_);
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(s.message(), "stopped in column 9");
  EXPECT_EQ(s.reason(), "CANCELLED");
  obs_.cancel = true;
  algo->error = OkStatus();
  s = step.RunAlgorithms(w, hidden_);
  EXPECT_EQ(s.message(), "cancelled") << "checked before each algorithm";
}

TEST_F(BlockStepTest, QuantizedForwardHandsTheNextBlockTheQuantizedOutput) {
  const BlockStep step = Step();
  BlockWork w = Loaded(step);
  at::Tensor hidden = hidden_.clone();
  ASSERT_TRUE(step.FloatForward(w, hidden).ok());
  ASSERT_TRUE(step.RoundWeights(w).ok());
  ASSERT_TRUE(step.QuantizedForward(w, hidden).ok());

  auto reference = model_->LoadBlock(0);
  ASSERT_TRUE(reference.ok());
  for (models::Linear* l : (*reference)->linears())
    ASSERT_TRUE(QuantizeLinearWeights(*l, plans_.at(l->name())).ok());
  auto quantized = (*reference)->Forward(hidden_);
  ASSERT_TRUE(quantized.ok());
  EXPECT_TRUE(at::allclose(hidden, *quantized, 1e-5, 1e-6));
  ASSERT_TRUE(w.report.output_rel_mse.has_value());
  EXPECT_NEAR(*w.report.output_rel_mse, OutputRelMse(*quantized, w.float_out), 1e-9);
  EXPECT_GT(*w.report.output_rel_mse, 0);
  EXPECT_LT(*w.report.output_rel_mse, 1e-2);

  opt_.calibration.on_float_outputs = true;
  BlockWork again = Loaded(step);
  hidden = hidden_.clone();
  ASSERT_TRUE(step.FloatForward(again, hidden).ok());
  ASSERT_TRUE(step.RoundWeights(again).ok());
  ASSERT_TRUE(step.QuantizedForward(again, hidden).ok());
  EXPECT_TRUE(at::equal(hidden, again.float_out));
}

TEST_F(BlockStepTest, WithoutCalibrationSamplesNothingIsMeasured) {
  const BlockStep step = Step();
  BlockWork w = Loaded(step);
  at::Tensor none;
  ASSERT_TRUE(step.FloatForward(w, none).ok());
  ASSERT_TRUE(step.RoundWeights(w).ok());
  ASSERT_TRUE(step.QuantizedForward(w, none).ok());
  EXPECT_FALSE(w.float_out.defined());
  EXPECT_FALSE(none.defined());
  EXPECT_FALSE(w.report.output_rel_mse.has_value());
}

TEST_F(BlockStepTest, PersistWritesTheBlockFileTheStoreServes) {
  const BlockStep step = Step();
  BlockWork w = Loaded(step);
  ASSERT_TRUE(step.RoundWeights(w).ok());
  ASSERT_TRUE(step.Persist(w).ok());
  ASSERT_TRUE(scratch_->Flush().ok());
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "block_00000.safetensors"));
  const std::string q = std::string(FakeAlgorithm::kQ) + ".weight";
  ASSERT_NE(scratch_->Find(q), nullptr);
  EXPECT_TRUE(at::equal(*scratch_->Load(q), w.block->FindLinear(FakeAlgorithm::kQ)->weight()));
  step.Finish(w);
  EXPECT_GT(w.report.seconds, 0);
  EXPECT_EQ(w.report.device_peak_allocated_bytes, 0) << "CPU: the allocator reports nothing";
}

}  // namespace
}  // namespace quantd::pipeline
