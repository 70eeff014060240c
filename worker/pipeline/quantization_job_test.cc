#include "worker/pipeline/quantization_job.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/quant/fake_quant.h"

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;

quant::QuantSpec IntWeightSpec(quant::DataType dtype, quant::QScheme scheme, bool sym,
                               int group = 0) {
  quant::QuantSpec s;
  s.dtype = dtype;
  s.qscheme = scheme;
  s.symmetric = sym;
  if (scheme == quant::QScheme::kPerChannel) s.ch_axis = 0;
  if (group > 0) s.group_size = group;
  return s;
}

// Quantizes every linear of the decoder blocks, leaves lm_head in float.
LayerPlanner AllBlockLinears(const quant::QuantSpec& spec) {
  return [spec](const std::string& name, const std::string&) {
    LayerPlan p;
    if (name.rfind("model.layers.", 0) == 0) p.weight = spec;
    return p;
  };
}

class RecordingObserver : public JobObserver {
 public:
  void OnProgress(const ProgressInfo& p) override {
    std::lock_guard<std::mutex> l(mu);
    progress.push_back(p);
  }
  void OnLog(LogLevel, const std::string& m) override {
    std::lock_guard<std::mutex> l(mu);
    logs.push_back(m);
  }
  void OnBlock(const BlockReport& b) override {
    std::lock_guard<std::mutex> l(mu);
    blocks.push_back(b);
    if (cancel_after_block > 0 && b.block >= cancel_after_block) cancel = true;
  }
  bool CancelRequested() const override { return cancel; }

  std::mutex mu;
  std::vector<ProgressInfo> progress;
  std::vector<std::string> logs;
  std::vector<BlockReport> blocks;
  int cancel_after_block = 0;
  bool cancel = false;
};

class QuantizationJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("qjob_" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  JobOptions Options(LayerPlanner planner) {
    JobOptions o;
    o.model_dir = "models/stories260K";
    o.planner = std::move(planner);
    o.quantization_description = "test";
    o.evaluation.dataset_path = "tests/data/tinystories-sample.txt";
    o.evaluation.n_ctx = 256;
    o.evaluation.max_windows = 20;
    o.export_options.output_dir = (root_ / "out").string();
    o.scratch_dir = (root_ / "scratch").string();
    return o;
  }

  // The job without its evaluation stage.
  JobOutcome RunWithoutEvaluation(LayerPlanner planner, RecordingObserver& obs) {
    auto opt = Options(std::move(planner));
    opt.evaluation.enabled = false;
    return RunQuantizationJob(opt, obs);
  }

  fs::path root_;
};

TEST_F(QuantizationJobTest, Int8PerChannelEndToEnd) {
  auto spec = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerChannel, true);
  RecordingObserver obs;
  JobOutcome out = RunQuantizationJob(Options(AllBlockLinears(spec)), obs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  const JobReport& r = out.report;

  // Float perplexity of the first 20 windows is the golden value.
  ASSERT_TRUE(r.float_perplexity.has_value());
  EXPECT_NEAR(r.float_perplexity->ppl, 4.8374, 1e-3);
  EXPECT_EQ(r.float_perplexity->tokens, 5100);
  ASSERT_TRUE(r.quantized_perplexity.has_value());
  EXPECT_NE(r.quantized_perplexity->ppl, r.float_perplexity->ppl);
  EXPECT_LT(std::abs(r.quantized_perplexity->ppl / r.float_perplexity->ppl - 1), 0.02);
  // Evaluation held the 35 quantized linears (q/o 64x64, k/v 32x64 with GQA,
  // MLP 172x64) frozen: int8 codes, one byte per
  // weight plus a scale and zero point per row.
  EXPECT_EQ(r.frozen_linear_float_bytes, 5 * 4 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 64 * 172));
  EXPECT_LT(r.frozen_linear_bytes, 0.3 * r.frozen_linear_float_bytes);
  EXPECT_GT(r.frozen_linear_bytes, 0.25 * r.frozen_linear_float_bytes);
  EXPECT_GT(*r.kl_mean, 0);
  EXPECT_GT(*r.top1_agreement, 0.9);

  // Five blocks of seven linears, each with a sane SQNR and a measured error.
  ASSERT_EQ(r.blocks.size(), 5u);
  ASSERT_EQ(obs.blocks.size(), 5u);
  for (const auto& b : r.blocks) {
    EXPECT_EQ(b.block_count, 5);
    ASSERT_EQ(b.layers.size(), 7u);
    ASSERT_TRUE(b.output_rel_mse.has_value());
    EXPECT_GT(*b.output_rel_mse, 0);
    EXPECT_LT(*b.output_rel_mse, 1e-2);
    EXPECT_GT(b.seconds, 0);
    EXPECT_EQ(b.algorithm_seconds, 0) << "no block algorithms";
    for (const auto& l : b.layers) {
      EXPECT_EQ(l.weight_format, "int8 per_channel(axis 0) sym");
      EXPECT_GT(l.weight_sqnr_db, 30) << l.name;
      EXPECT_LT(l.weight_sqnr_db, 60) << l.name;
    }
  }
  // int8 weights: about a quarter of the float bytes for the quantized
  // tensors; the embedding stays float.
  EXPECT_LT(r.quantized_model_bytes, r.float_model_bytes);

  // Progress only moves forward and ends at 100%.
  double last = -1;
  for (const auto& p : obs.progress) {
    EXPECT_GE(p.percent, last - 1e-9);
    last = p.percent;
  }
  EXPECT_DOUBLE_EQ(last, 100.0);

  // The exported weights are exactly the fake-quantized originals.
  ASSERT_EQ(r.artifacts.size(), 1u);
  auto original = io::SafetensorsSource::Open("models/stories260K/model.safetensors");
  auto exported = io::SafetensorsSource::Open(r.artifacts[0].path + "/model.safetensors");
  ASSERT_TRUE(exported.ok()) << exported.status();
  for (const auto& name : (*original)->Names()) {
    at::Tensor w = *(*original)->Load(name);
    at::Tensor want = w;
    if (name.rfind("model.layers.", 0) == 0 && name.find("_proj.weight") != std::string::npos) {
      auto qp = quant::ComputeQParams(w, spec);
      want = *quant::FakeQuantize(w, spec, *qp);
      EXPECT_FALSE(at::equal(want, w)) << name;
    }
    EXPECT_TRUE(at::equal(*(*exported)->Load(name), want)) << name;
  }
  std::ifstream cfg(r.artifacts[0].path + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(cfg)["quantization_config"]["quant_method"], "quark");
}

TEST_F(QuantizationJobTest, GroupSizeThatDoesNotDivideNamesEveryLayer) {
  auto spec = IntWeightSpec(quant::DataType::kInt4, quant::QScheme::kPerGroup, true, 32);
  RecordingObserver obs;
  JobOutcome out = RunQuantizationJob(Options(AllBlockLinears(spec)), obs);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status.reason(), "LAYER_CONFIG_MISMATCH");
  EXPECT_NE(out.status.message().find("model.layers.0.mlp.down_proj"), std::string::npos)
      << out.status;
  ASSERT_EQ(out.status.violations().size(), 5u);  // down_proj of each block (in_features 172)
  EXPECT_EQ(out.status.violations()[4].field, "layer model.layers.4.mlp.down_proj");
  EXPECT_TRUE(obs.blocks.empty());  // failed before any work
  EXPECT_FALSE(fs::exists(root_ / "out"));
}

TEST_F(QuantizationJobTest, ExcludedLayersStayFloat) {
  auto spec = IntWeightSpec(quant::DataType::kInt4, quant::QScheme::kPerGroup, true, 32);
  LayerPlanner planner = [spec](const std::string& name, const std::string&) {
    LayerPlan p;
    if (name.rfind("model.layers.", 0) == 0 && name.find("down_proj") == std::string::npos)
      p.weight = spec;
    return p;
  };
  RecordingObserver obs;
  JobOutcome out = RunWithoutEvaluation(planner, obs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (const auto& b : out.report.blocks)
    for (const auto& l : b.layers) {
      const bool down = l.name.find("down_proj") != std::string::npos;
      EXPECT_EQ(l.excluded, down) << l.name;
      EXPECT_EQ(l.weight_format, down ? "float" : "int4 per_group(32) sym") << l.name;
    }
  EXPECT_FALSE(out.report.float_perplexity.has_value());
}

TEST_F(QuantizationJobTest, CancelStopsAtBlockBoundaryWithoutArtifacts) {
  auto spec = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerTensor, true);
  RecordingObserver obs;
  obs.cancel_after_block = 2;
  JobOutcome out = RunQuantizationJob(Options(AllBlockLinears(spec)), obs);
  EXPECT_TRUE(out.cancelled);
  EXPECT_EQ(out.status.code(), StatusCode::kCancelled);
  EXPECT_EQ(obs.blocks.size(), 2u);
  EXPECT_FALSE(fs::exists(root_ / "out"));
}

// Planning matches every layer name against the config; a cancel during it
// stops the job at the next layer, before any block runs.
TEST_F(QuantizationJobTest, CancelDuringPlanningStopsAtTheNextLayer) {
  const auto spec = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerTensor, true);
  RecordingObserver obs;
  int planned = 0;
  LayerPlanner planner = [&](const std::string& name, const std::string& type) {
    if (++planned == 3) obs.cancel = true;
    return AllBlockLinears(spec)(name, type);
  };
  JobOutcome out = RunQuantizationJob(Options(planner), obs);
  EXPECT_TRUE(out.cancelled);
  EXPECT_EQ(out.status.code(), StatusCode::kCancelled);
  EXPECT_NE(out.status.message().find("planning layer"), std::string::npos) << out.status;
  EXPECT_EQ(planned, 3);
  EXPECT_TRUE(obs.blocks.empty());
  EXPECT_FALSE(fs::exists(root_ / "out"));
}

// A cancel once evaluation starts stops it (before its first batch here),
// with no perplexity and nothing exported.
TEST_F(QuantizationJobTest, CancelDuringEvaluationStopsWithoutResultOrArtifacts) {
  const auto spec = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerTensor, true);
  class CancelOnEvaluate : public RecordingObserver {
   public:
    void OnProgress(const ProgressInfo& p) override {
      RecordingObserver::OnProgress(p);
      if (p.stage == Stage::kEvaluate) cancel = true;
    }
  } obs;
  JobOutcome out = RunQuantizationJob(Options(AllBlockLinears(spec)), obs);
  EXPECT_TRUE(out.cancelled);
  EXPECT_EQ(out.status.code(), StatusCode::kCancelled);
  EXPECT_EQ(obs.blocks.size(), 5u);  // quantization had finished
  EXPECT_FALSE(out.report.float_perplexity.has_value());
  EXPECT_FALSE(out.report.quantized_perplexity.has_value());
  EXPECT_FALSE(fs::exists(root_ / "out"));
}

// QuantEmbedding: layer_type "Embedding" fake-quantizes the token table;
// stories260K ties lm_head to it, and the head keeps the float weight (as in
// the reference, whose QuantEmbedding quantizes in its own forward), so the
// export is untied.
TEST_F(QuantizationJobTest, EmbeddingIsQuantizedAndTheTiedHeadKeepsTheFloatWeight) {
  const auto spec = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerChannel, true);
  const auto block_spec = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerChannel, true);
  auto run = [&](bool embedding, const std::string& dir) {
    LayerPlanner planner = [=](const std::string& name, const std::string& type) {
      LayerPlan p;
      if (name.rfind("model.layers.", 0) == 0) p.weight = block_spec;
      if (embedding && type == "Embedding") p.weight = spec;
      return p;
    };
    auto opt = Options(planner);
    opt.export_options.output_dir = (root_ / dir).string();
    opt.scratch_dir = (root_ / (dir + "-scratch")).string();
    RecordingObserver obs;
    JobOutcome out = RunQuantizationJob(opt, obs);
    return std::make_pair(out, obs.logs);
  };
  auto [with, logs] = run(true, "emb");
  auto [without, unused] = run(false, "noemb");
  ASSERT_TRUE(with.status.ok()) << with.status;
  ASSERT_TRUE(without.status.ok()) << without.status;

  auto original = io::SafetensorsSource::Open("models/stories260K/model.safetensors");
  auto exported = io::SafetensorsSource::Open(with.report.artifacts[0].path + "/model.safetensors");
  ASSERT_TRUE(exported.ok()) << exported.status();
  const at::Tensor table = *(*original)->Load("model.embed_tokens.weight");
  auto qp = quant::ComputeQParams(table, spec);
  ASSERT_TRUE(qp.ok());
  const at::Tensor want = *quant::FakeQuantize(table, spec, *qp);
  EXPECT_FALSE(at::equal(want, table));
  EXPECT_TRUE(at::equal(*(*exported)->Load("model.embed_tokens.weight"), want));
  // The head: the float table, under its own name, and the config untied.
  auto head = (*exported)->Load("lm_head.weight");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_TRUE(at::equal(*head, table));
  std::ifstream cfg(with.report.artifacts[0].path + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(cfg)["tie_word_embeddings"], false);

  // The quantized table changes the model (perplexity), and the log names it.
  EXPECT_NE(with.report.quantized_perplexity->ppl, without.report.quantized_perplexity->ppl);
  EXPECT_EQ(with.report.float_perplexity->ppl, without.report.float_perplexity->ppl);
  bool logged = false;
  for (const auto& m : logs)
    logged = logged || m.rfind("model.embed_tokens (Embedding): int8 per_channel(axis 0) sym, "
                               "weight SQNR ", 0) == 0;
  EXPECT_TRUE(logged);
  // Evaluation looked rows up in the frozen table: int8 codes and a scale
  // per row, as the model size counts them (memory also held a zero point).
  const std::string frozen = "evaluated the frozen embedding: 128.0 KiB as float, 34.0 KiB "
                             "real-quantized (0.266x), held in memory as 36.0 KiB";
  EXPECT_NE(std::find(logs.begin(), logs.end(), frozen), logs.end());
  // int8 codes plus a scale per row instead of float32: 512 x 64 table.
  EXPECT_EQ(without.report.quantized_model_bytes - with.report.quantized_model_bytes,
            512 * 64 * 4 - (512 * 64 + 512 * 4));
}

// 3-bit codes count as 3 bits in the model size, the evaluation line and
// the report, and those agree (issue 25: the evaluation line counted them
// as 8 bits, the int8 figure, while the summary counted 3).
TEST_F(QuantizationJobTest, SizesCountThreeBitCodesAtThreeBitsEverywhere) {
  auto spec = IntWeightSpec(quant::DataType::kUInt3, quant::QScheme::kPerChannel, false);
  RecordingObserver obs;
  auto opt = Options(AllBlockLinears(spec));
  opt.evaluation.max_windows = 2;
  JobOutcome out = RunQuantizationJob(opt, obs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  const JobReport& r = out.report;
  // 35 linears: q/o 64x64, k/v 32x64, gate/up 172x64, down 64x172 per block;
  // 3 bits a weight, a float32 scale and zero point per output row.
  const int64_t weights = 5 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 64 * 172);
  const int64_t rows = 5 * (64 + 32 + 32 + 64 + 172 + 172 + 64);
  const int64_t packed = weights * 3 / 8 + rows * 8;
  EXPECT_EQ(r.frozen_linear_float_bytes, weights * 4);
  EXPECT_EQ(r.frozen_linear_packed_bytes, packed);
  EXPECT_EQ(r.quantized_model_bytes, r.float_model_bytes - weights * 4 + packed);
  // Memory held the codes one per byte.
  EXPECT_EQ(r.frozen_linear_bytes, weights + rows * 8);
  char want[200];
  std::snprintf(want, sizeof(want),
                "evaluated 35 frozen linears: %.1f KiB as float, %.1f KiB real-quantized (%.3fx), "
                "held in memory as %.1f KiB",
                weights * 4 / 1024.0, packed / 1024.0, static_cast<double>(packed) / (weights * 4),
                (weights + rows * 8) / 1024.0);
  EXPECT_NE(std::find(obs.logs.begin(), obs.logs.end(), std::string(want)), obs.logs.end())
      << want;
}

// Without calibration data there is no block output to compare: the blocks
// report no rel-MSE (not a -1 sentinel), and a log line says why.
TEST_F(QuantizationJobTest, BlockOutputErrorIsAbsentWithoutCalibrationData) {
  auto spec = IntWeightSpec(quant::DataType::kInt4, quant::QScheme::kPerChannel, true);
  RecordingObserver obs;
  JobOutcome out = RunWithoutEvaluation(AllBlockLinears(spec), obs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  ASSERT_EQ(out.report.blocks.size(), 5u);
  for (const auto& b : out.report.blocks) EXPECT_FALSE(b.output_rel_mse.has_value()) << b.block;
  EXPECT_NE(std::find(obs.logs.begin(), obs.logs.end(),
                      "block output rel-mse: not measured: no calibration data"),
            obs.logs.end());
}

// A glob that matches the embedding too (here "*") gives it the weight spec
// only, with a warning: its input is token ids.
TEST_F(QuantizationJobTest, AnEmbeddingMatchedByAGlobTakesOnlyTheWeightSpec) {
  LayerPlanner planner = [](const std::string& name, const std::string&) {
    LayerPlan p;
    if (name.find("down_proj") != std::string::npos || name == "lm_head") return p;
    p.weight = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerChannel, true);
    p.input = IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerTensor, true);
    p.input->is_dynamic = true;
    return p;
  };
  RecordingObserver obs;
  JobOutcome out = RunWithoutEvaluation(planner, obs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_NE(std::find(obs.logs.begin(), obs.logs.end(),
                      "model.embed_tokens: an embedding's input is token ids and it has no bias; "
                      "only its weight spec applies"),
            obs.logs.end());
  bool quantized = false;
  for (const auto& m : obs.logs)
    quantized = quantized || m.rfind("model.embed_tokens (Embedding): int8 per_channel", 0) == 0;
  EXPECT_TRUE(quantized);
}

TEST_F(QuantizationJobTest, MissingModelIsNotFound) {
  auto opt = Options(
      AllBlockLinears(IntWeightSpec(quant::DataType::kInt8, quant::QScheme::kPerTensor, true)));
  opt.model_dir = (root_ / "no-such-model").string();
  RecordingObserver obs;
  JobOutcome out = RunQuantizationJob(opt, obs);
  EXPECT_EQ(out.status.code(), StatusCode::kNotFound) << out.status;
  EXPECT_NE(out.status.message().find("no-such-model"), std::string::npos) << out.status;
}

}  // namespace
}  // namespace quantd::pipeline
