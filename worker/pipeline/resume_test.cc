// Resumable jobs: a job stopped after some blocks continues from its
// checkpoint on the next attempt and produces the same bytes as a job that
// was never interrupted.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>

#include "gtest/gtest.h"
#include "worker/common/sha256.h"
#include "worker/models/random_checkpoint.h"
#include "worker/pipeline/quantization_job.h"
#include "worker/pipeline/resume_state.h"

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;

class StoppingObserver : public JobObserver {
 public:
  explicit StoppingObserver(int stop_after_blocks = -1) : stop_after_(stop_after_blocks) {}
  void OnLog(LogLevel, const std::string& m) override {
    std::lock_guard<std::mutex> l(mu_);
    logs.push_back(m);
  }
  void OnBlock(const BlockReport& b) override {
    std::lock_guard<std::mutex> l(mu_);
    blocks.push_back(b.block);
  }
  bool CancelRequested() const override {
    std::lock_guard<std::mutex> l(mu_);
    return stop_after_ >= 0 && static_cast<int>(blocks.size()) >= stop_after_;
  }
  bool Logged(const std::string& needle) const {
    for (const auto& m : logs)
      if (m.find(needle) != std::string::npos) return true;
    return false;
  }
  std::vector<std::string> logs;
  std::vector<int> blocks;

 private:
  mutable std::mutex mu_;
  int stop_after_;
};

quant::QuantSpec Int8PerChannel() {
  quant::QuantSpec w;
  w.dtype = quant::DataType::kInt8;
  w.qscheme = quant::QScheme::kPerChannel;
  w.ch_axis = 0;
  return w;
}

quant::QuantSpec Int8PerTensor() {
  quant::QuantSpec a;
  a.dtype = quant::DataType::kInt8;
  return a;
}

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("resume_" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // W8A8 with static int8 inputs and an FP8 KV cache, so a resumed job must
  // also restore calibrated activation parameters and the hidden states.
  JobOptions Options(const std::string& name) {
    const quant::QuantSpec w = Int8PerChannel(), a = Int8PerTensor();
    JobOptions o;
    o.model_dir = "models/stories260K";
    o.planner = [w, a](const std::string& n, const std::string&) {
      LayerPlan p;
      if (n.rfind("model.layers.", 0) == 0) {
        p.weight = w;
        p.input = a;
      }
      return p;
    };
    quant::QuantSpec kv;
    kv.dtype = quant::DataType::kFp8E4M3;
    o.kv_cache = kv;
    o.quantization_description = "w8a8 static + fp8 kv";
    o.calibration.dataset_path = "tests/data/tinyshakespeare.txt";
    o.calibration.num_samples = 4;
    o.calibration.seq_len = 128;
    o.evaluation.dataset_path = "tests/data/tinystories-sample.txt";
    o.evaluation.max_windows = 10;
    o.export_options.output_dir = (root_ / name / "out").string();
    o.scratch_dir = (root_ / name / "scratch").string();
    return o;
  }

  fs::path root_;
};

// Every BlockReport field survives resume.json, so a resumed job reports
// its earlier blocks as they were measured.
TEST(ResumeStateTest, BlockReportsRoundTrip) {
  const std::string dir = ::testing::TempDir() + "/resume_state_round_trip";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ResumeState st;
  st.fingerprint = "f";
  st.blocks_done = 1;
  st.bytes_delta = -12345;
  st.has_hidden = true;
  BlockReport b;
  b.block = 1;
  b.block_count = 32;
  b.output_rel_mse = 2.6e-4;
  b.seconds = 61.5;
  b.algorithm_seconds = 40.25;
  b.device_peak_allocated_bytes = (int64_t{15} << 30) + 7;
  b.device_peak_reserved_bytes = (int64_t{41} << 30) + 3;
  LayerReport l;
  l.name = "model.layers.0.mlp.down_proj";
  l.weight_sqnr_db = 22.125;
  l.sensitivity_relative_mse = {7.5e-3, 2.75e-5};
  b.layers.push_back(l);
  LayerReport excluded;  // left in float: its SQNR is infinite
  excluded.name = "model.layers.0.mlp.gate";
  excluded.excluded = true;
  excluded.weight_sqnr_db = std::numeric_limits<double>::infinity();
  b.layers.push_back(excluded);
  st.blocks.push_back(b);
  ASSERT_TRUE(WriteResumeState(dir, st).ok());
  auto back = ReadResumeState(dir);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->bytes_delta, -12345);
  ASSERT_EQ(back->blocks.size(), 1u);
  const BlockReport& r = back->blocks[0];
  EXPECT_EQ(r.block_count, 32);
  EXPECT_EQ(r.output_rel_mse, std::optional<double>(2.6e-4));
  EXPECT_EQ(r.seconds, 61.5);
  EXPECT_EQ(r.algorithm_seconds, 40.25);
  EXPECT_EQ(r.device_peak_allocated_bytes, (int64_t{15} << 30) + 7);
  EXPECT_EQ(r.device_peak_reserved_bytes, (int64_t{41} << 30) + 3);
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.layers[0].name, "model.layers.0.mlp.down_proj");
  EXPECT_EQ(r.layers[0].weight_sqnr_db, 22.125);
  EXPECT_EQ(r.layers[0].sensitivity_relative_mse, (std::vector<double>{7.5e-3, 2.75e-5}));
  EXPECT_TRUE(r.layers[1].excluded);
  EXPECT_TRUE(r.layers[1].sensitivity_relative_mse.empty());
  EXPECT_EQ(r.layers[1].weight_sqnr_db, std::numeric_limits<double>::infinity());
}

TEST_F(ResumeTest, StoppedJobResumesAfterTheLastFinishedBlockWithIdenticalResults) {
  StoppingObserver full_obs;
  JobOutcome full = RunQuantizationJob(Options("full"), full_obs);
  ASSERT_TRUE(full.status.ok()) << full.status;

  // Attempt 1 stops after two finished blocks.
  JobOptions o = Options("resumed");
  StoppingObserver first(2);
  JobOutcome stopped = RunQuantizationJob(o, first);
  ASSERT_EQ(stopped.status.code(), StatusCode::kCancelled);
  auto st = ReadResumeState(o.scratch_dir);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->blocks_done, 2);
  EXPECT_TRUE(st->has_hidden);
  EXPECT_TRUE(fs::exists(fs::path(o.scratch_dir) / (HiddenFileName(2) + ".safetensors")));
  EXPECT_FALSE(fs::exists(fs::path(o.scratch_dir) / (HiddenFileName(1) + ".safetensors")));

  // Attempt 2 continues at block 3 and ends exactly where the full run did.
  StoppingObserver second;
  JobOutcome resumed = RunQuantizationJob(o, second);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_TRUE(second.Logged("resumed at block 3/5")) << second.logs.size();
  EXPECT_EQ(second.blocks, (std::vector<int>{3, 4, 5}));
  ASSERT_EQ(resumed.report.blocks.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(resumed.report.blocks[i].output_rel_mse, full.report.blocks[i].output_rel_mse) << i;
  EXPECT_EQ(resumed.report.quantized_perplexity->ppl, full.report.quantized_perplexity->ppl);
  EXPECT_EQ(resumed.report.kl_mean, full.report.kl_mean);
  EXPECT_EQ(resumed.report.quantized_model_bytes, full.report.quantized_model_bytes);
  auto a = Sha256File(o.export_options.output_dir + "/model.safetensors");
  auto b = Sha256File(Options("full").export_options.output_dir + "/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

// A mixture-of-experts job that leaves its starved experts in float
// (keep_starved_experts_float) resumes with the same experts in float, the
// same per-expert reports and the same bytes.
TEST_F(ResumeTest, MoeJobWithFloatExpertsResumesIdentically) {
  const std::string model = (root_ / "qwen2-moe").string();
  models::RandomCheckpointOptions c;
  c.architecture = "qwen2_moe";
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 512;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 32;
  c.dtype = io::SafetensorsDtype::kF32;
  c.seed = 3;
  fs::create_directories(model);
  auto written = models::WriteRandomLlamaCheckpoint(model, c);
  ASSERT_TRUE(written.ok()) << written.status();
  fs::copy_file("models/stories260K/tokenizer.model", model + "/tokenizer.model");
  auto options = [&](const std::string& name) {
    JobOptions o = Options(name);
    o.model_dir = model;
    const quant::QuantSpec w = Int8PerChannel(), a = Int8PerTensor();
    // The attention and the experts; routers and the shared expert in float.
    o.planner = [w, a](const std::string& n, const std::string&) {
      LayerPlan p;
      if (n.find(".self_attn.") != std::string::npos ||
          n.find(".mlp.experts.") != std::string::npos) {
        p.weight = w;
        p.input = a;
      }
      return p;
    };
    o.kv_cache.reset();
    // 4 x 64 tokens, 2 of 8 experts each: 64 routed tokens an expert on average.
    o.calibration.seq_len = 64;
    o.calibration.min_expert_tokens = 64;
    o.calibration.keep_starved_experts_float = true;
    return o;
  };
  StoppingObserver full_obs;
  JobOutcome full = RunQuantizationJob(options("moe-full"), full_obs);
  ASSERT_TRUE(full.status.ok()) << full.status;
  int kept = 0, total = 0;
  for (const auto& b : full.report.blocks) {
    for (const auto& e : b.experts) {
      kept += e.kept_float;
      ++total;
    }
  }
  ASSERT_EQ(total, 24);
  ASSERT_GT(kept, 0);
  ASSERT_LT(kept, total);

  JobOptions o = options("moe-resumed");
  StoppingObserver first(1);
  const JobOutcome stopped = RunQuantizationJob(o, first);
  ASSERT_EQ(stopped.status.code(), StatusCode::kCancelled) << stopped.status;
  // The checkpoint after block 1 reads back (an excluded layer's infinite
  // weight SQNR once made it unreadable, and the job silently started over).
  auto st = ReadResumeState(o.scratch_dir);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->blocks_done, 1);
  EXPECT_EQ(st->fingerprint, ResumeFingerprint(o));
  StoppingObserver second;
  JobOutcome resumed = RunQuantizationJob(o, second);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_TRUE(second.Logged("resumed at block 2/3"));
  EXPECT_EQ(second.blocks, (std::vector<int>{2, 3}));
  ASSERT_EQ(resumed.report.blocks.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto &r = resumed.report.blocks[i], &f = full.report.blocks[i];
    EXPECT_EQ(r.output_rel_mse, f.output_rel_mse) << i;
    ASSERT_EQ(r.experts.size(), f.experts.size()) << i;
    for (size_t e = 0; e < r.experts.size(); ++e) {
      EXPECT_EQ(r.experts[e].calibration_tokens, f.experts[e].calibration_tokens) << i << " " << e;
      EXPECT_EQ(r.experts[e].kept_float, f.experts[e].kept_float) << i << " " << e;
    }
  }
  EXPECT_EQ(resumed.report.quantized_perplexity->ppl, full.report.quantized_perplexity->ppl);
  auto a = Sha256File(o.export_options.output_dir + "/model.safetensors");
  auto b = Sha256File(options("moe-full").export_options.output_dir + "/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

// Paced checkpoints (here: after block 1 and the last block only, as a
// costly one would be): a stopped job resumes from the last one written,
// redoes the blocks after it, and leaves one hidden-state file behind.
TEST_F(ResumeTest, PacedCheckpointsResumeFromTheLastOneWritten) {
  JobOptions o = Options("paced");
  o.checkpoint_cheap_seconds = 0;
  o.checkpoint_work_per_cost = 1e9;
  const fs::path scratch(o.scratch_dir);
  StoppingObserver first(3);
  ASSERT_EQ(RunQuantizationJob(o, first).status.code(), StatusCode::kCancelled);
  auto st = ReadResumeState(o.scratch_dir);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->blocks_done, 1);
  EXPECT_TRUE(fs::exists(scratch / (HiddenFileName(1) + ".safetensors")));
  for (int i : {2, 3}) EXPECT_FALSE(fs::exists(scratch / (HiddenFileName(i) + ".safetensors")));

  StoppingObserver second;
  JobOutcome resumed = RunQuantizationJob(o, second);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_TRUE(second.Logged("resumed at block 2/5"));
  EXPECT_EQ(second.blocks, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_FALSE(fs::exists(scratch / (HiddenFileName(1) + ".safetensors")));
  EXPECT_TRUE(fs::exists(scratch / (HiddenFileName(5) + ".safetensors")));

  // Uninterrupted and paced: checkpoints after blocks 1 and 5, and only the
  // last one's hidden states stay.
  JobOptions full_options = Options("paced_full");
  full_options.checkpoint_cheap_seconds = 0;
  full_options.checkpoint_work_per_cost = 1e9;
  StoppingObserver full_obs;
  JobOutcome full = RunQuantizationJob(full_options, full_obs);
  ASSERT_TRUE(full.status.ok()) << full.status;
  const fs::path full_scratch(full_options.scratch_dir);
  EXPECT_FALSE(fs::exists(full_scratch / (HiddenFileName(1) + ".safetensors")));
  EXPECT_TRUE(fs::exists(full_scratch / (HiddenFileName(5) + ".safetensors")));
  auto a = Sha256File(o.export_options.output_dir + "/model.safetensors");
  auto b = Sha256File(Options("paced_full").export_options.output_dir + "/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST_F(ResumeTest, CheckpointOfOtherOptionsIsIgnored) {
  JobOptions o = Options("changed");
  StoppingObserver first(1);
  ASSERT_EQ(RunQuantizationJob(o, first).status.code(), StatusCode::kCancelled);
  o.calibration.seed = 99;  // a different calibration set
  StoppingObserver second;
  JobOutcome out = RunQuantizationJob(o, second);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(second.Logged("starting over"));
  EXPECT_EQ(second.blocks, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(ResumeStateTest, SensitivityCandidatesAreInTheFingerprint) {
  JobOptions o;
  const std::string none = ResumeFingerprint(o);
  o.sensitivity.push_back({"w_int4_per_channel_sym", nullptr});
  const std::string int4 = ResumeFingerprint(o);
  o.sensitivity[0].name = "w_int8_per_channel_sym";
  EXPECT_NE(none, int4);
  EXPECT_NE(int4, ResumeFingerprint(o));
}

TEST_F(ResumeTest, DamagedCheckpointStartsOver) {
  JobOptions o = Options("damaged");
  StoppingObserver first(2);
  ASSERT_EQ(RunQuantizationJob(o, first).status.code(), StatusCode::kCancelled);
  fs::remove(fs::path(o.scratch_dir) / "block_00001.safetensors");
  StoppingObserver second;
  JobOutcome out = RunQuantizationJob(o, second);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(second.Logged("cannot resume"));
  EXPECT_EQ(second.blocks.size(), 5u);
}

// A manifest that cannot be read is said, not taken for no checkpoint.
TEST_F(ResumeTest, UnreadableManifestIsLoggedAndTheJobStartsOver) {
  JobOptions o = Options("unreadable");
  StoppingObserver first(2);
  ASSERT_EQ(RunQuantizationJob(o, first).status.code(), StatusCode::kCancelled);
  std::ofstream(fs::path(o.scratch_dir) / "resume.json", std::ios::trunc) << "{\"version\": ";
  auto loaded = LoadResumeState(o.scratch_dir);
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  StoppingObserver second;
  JobOutcome out = RunQuantizationJob(o, second);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_TRUE(second.Logged("cannot read the checkpoint (DATA_LOSS: "));
  EXPECT_EQ(second.blocks.size(), 5u);
}

}  // namespace
}  // namespace quantd::pipeline
