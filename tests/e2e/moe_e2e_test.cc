// Mixture-of-experts jobs through the service (quantctl -> quantd -> a
// worker), on a Qwen2-MoE checkpoint with its real tensor names (a router,
// four experts, a shared expert and its gate) built so that block 1's router
// never picks expert 3: channel 0 of every token embedding is 4, no
// attention output writes to it, and the router's rows weigh it +3 for
// experts 0-2 and -3 for expert 3. The jobs show
//   - routing-aware calibration: the block metrics count each expert's
//     routed tokens, expert 3 of block 1 gets none and is reported below the
//     floor, and the job says so in its events;
//   - GPTQ on the experts (Hessians from their own tokens) beating
//     round-to-nearest on the blocks' output error;
//   - static activation scales for the starved expert (taken from its
//     peers), SmoothQuant through the router group, AWQ on the attention;
//   - the routers left in float, and exports that hold no MoE refused with a
//     message naming why.
#include <ATen/ATen.h>
#include <google/protobuf/util/json_util.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::e2e {
namespace {

namespace fs = std::filesystem;
using quantd::v1::Job;

constexpr int64_t kHidden = 64, kExperts = 4, kExpertFfn = 32, kSharedFfn = 64, kVocab = 512;

// Uniform weights of standard deviation 1/sqrt(in) keep activations O(1).
at::Tensor Weight(int64_t out, int64_t in) {
  return (at::rand({out, in}) * 2 - 1) * std::sqrt(3.0 / static_cast<double>(in));
}

void WriteStarvedMoe(const std::string& dir) {
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << R"({"architectures": ["Qwen2MoeForCausalLM"],
    "model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
    "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "bos_token_id": 1,
    "eos_token_id": 2, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
    "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "use_sliding_window": false, "torch_dtype": "float32"})";
  at::manual_seed(5);
  std::vector<std::pair<std::string, at::Tensor>> t;
  at::Tensor embed = at::randn({kVocab, kHidden}) * 0.5;
  embed.select(1, 0).fill_(4.0);
  t.emplace_back("model.embed_tokens.weight", embed);
  t.emplace_back("model.norm.weight", at::ones({kHidden}));
  t.emplace_back("lm_head.weight", Weight(kVocab, kHidden));
  const int64_t hd = kHidden / 2;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.emplace_back(p + "input_layernorm.weight", at::ones({kHidden}));
    t.emplace_back(p + "post_attention_layernorm.weight", at::ones({kHidden}));
    t.emplace_back(p + "self_attn.q_proj.weight", Weight(2 * hd, kHidden));
    t.emplace_back(p + "self_attn.q_proj.bias", at::zeros({2 * hd}));
    t.emplace_back(p + "self_attn.k_proj.weight", Weight(hd, kHidden));
    t.emplace_back(p + "self_attn.k_proj.bias", at::zeros({hd}));
    t.emplace_back(p + "self_attn.v_proj.weight", Weight(hd, kHidden));
    t.emplace_back(p + "self_attn.v_proj.bias", at::zeros({hd}));
    at::Tensor o = Weight(kHidden, 2 * hd);
    o.select(0, 0).zero_();  // nothing reaches channel 0 from the attention
    t.emplace_back(p + "self_attn.o_proj.weight", o);
    at::Tensor router = Weight(kExperts, kHidden);
    router.select(1, 0).copy_(at::tensor({3.0f, 3.0f, 3.0f, -3.0f}));
    t.emplace_back(p + "mlp.gate.weight", router);
    auto mlp = [&](const std::string& m, int64_t ffn) {
      t.emplace_back(m + "gate_proj.weight", Weight(ffn, kHidden));
      t.emplace_back(m + "up_proj.weight", Weight(ffn, kHidden));
      t.emplace_back(m + "down_proj.weight", Weight(kHidden, ffn));
    };
    for (int e = 0; e < kExperts; ++e)
      mlp(p + "mlp.experts." + std::to_string(e) + ".", kExpertFfn);
    mlp(p + "mlp.shared_expert.", kSharedFfn);
    t.emplace_back(p + "mlp.shared_expert_gate.weight", Weight(1, kHidden));
  }
  auto writer = io::SafetensorsWriter::Create(dir + "/model.safetensors");
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& [name, tensor] : t) ASSERT_TRUE(io::AddTensor(**writer, name, tensor).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  fs::copy_file(Runfile("models/stories260K/tokenizer.model"), dir + "/tokenizer.model");
}

class MoeE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new std::string(TempDir("moe"));
    model_ = new std::string(*data_ + "/qwen2-moe");
    WriteStarvedMoe(*model_);
    QuantdOptions o;
    o.data_dir = *data_ + "/quantd";
    o.local_workers = 1;
    quantd_ = Quantd::Start(o).release();
  }
  static void TearDownTestSuite() {
    delete quantd_;
    delete model_;
    delete data_;
  }

  // Runs quantctl submit --wait with `args` after the common ones; the
  // final job.
  Job Run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"-o",      "json",  "submit",         "--wait",
                                     "--model", *model_, "--eval",         Text(),
                                     "--n-ctx", "64",    "--eval-windows", "4"};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = Quantctl(quantd_->address(), argv);
    Job job;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(LastLine(r.stdout_text), &job).ok())
        << r.stdout_text << r.stderr_text;
    return job;
  }

  static std::string Text() { return Runfile("tests/data/tinystories-sample.txt"); }
  static std::vector<std::string> Calibration() {
    return {"--calib", Text(), "--calib-samples", "16", "--calib-seq-len", "64"};
  }
  static double OutputError(const Job& job) {
    double sum = 0;
    for (const auto& b : job.result().metrics().blocks()) sum += b.output_rel_mse();
    return sum;
  }

  static std::string* data_;
  static std::string* model_;
  static Quantd* quantd_;
};

std::string* MoeE2eTest::data_ = nullptr;
std::string* MoeE2eTest::model_ = nullptr;
Quantd* MoeE2eTest::quantd_ = nullptr;

TEST_F(MoeE2eTest, GptqOnRoutedTokensReportsTheStarvedExpert) {
  std::vector<std::string> gptq_args = {
      "--scheme", "w_int4_per_channel_asym", "--algorithm", "gptq", "--format", "hf-quark"};
  std::vector<std::string> rtn_args = {"--scheme", "w_int4_per_channel_asym"};
  for (auto* args : {&gptq_args, &rtn_args}) {
    auto cal = Calibration();
    args->insert(args->end(), cal.begin(), cal.end());
  }
  const Job gptq = Run(gptq_args);
  ASSERT_EQ(gptq.state(), quantd::v1::SUCCEEDED) << gptq.error().message();
  const Job rtn = Run(rtn_args);
  ASSERT_EQ(rtn.state(), quantd::v1::SUCCEEDED) << rtn.error().message();

  const auto& blocks = gptq.result().metrics().blocks();
  ASSERT_EQ(blocks.size(), 2);
  // Block 1: 16 x 64 tokens, two experts each, none to expert 3.
  ASSERT_EQ(blocks[0].experts_size(), kExperts);
  int64_t routed = 0;
  for (const auto& e : blocks[0].experts()) {
    routed += e.calibration_tokens();
    EXPECT_EQ(e.below_floor(), e.expert() == 3) << e.expert();
    if (e.expert() == 3) EXPECT_EQ(e.calibration_tokens(), 0);
    if (e.expert() != 3) EXPECT_GE(e.calibration_tokens(), 8);
  }
  EXPECT_EQ(routed, 2 * 16 * 64);
  bool router_float = false, expert3_int4 = false;
  for (const auto& l : blocks[0].layers()) {
    if (l.name() == "model.layers.0.mlp.gate") router_float = l.excluded();
    if (l.name() == "model.layers.0.mlp.experts.3.down_proj")
      expert3_int4 = l.weight_format().rfind("int4", 0) == 0;
  }
  EXPECT_TRUE(router_float);
  EXPECT_TRUE(expert3_int4) << "the starved expert is rounded to nearest, not left out";
  // The job said so where a user watching it reads.
  bool warned = false;
  for (const auto& ev : Events(*quantd_->NewClient(), gptq.name())) {
    if (ev.has_log() &&
        ev.log().message().find("expert 3 was routed 0 calibration tokens") != std::string::npos)
      warned = true;
  }
  EXPECT_TRUE(warned);

  // GPTQ fits the experts to their own tokens: less block output error.
  std::printf("MoE W4 per-channel: block output rel-MSE sum rtn %.4e gptq %.4e\n", OutputError(rtn),
              OutputError(gptq));
  EXPECT_LT(OutputError(gptq), 0.9 * OutputError(rtn));
  ASSERT_EQ(gptq.result().artifacts_size(), 1);
  EXPECT_TRUE(fs::exists(gptq.result().artifacts(0).uri().substr(7) + "/model.safetensors"));
}

TEST_F(MoeE2eTest, StaticActivationsSmoothQuantAndAwq) {
  // Expert 3's static input scales come from its peers.
  std::vector<std::string> smooth = {"--scheme", "w_int8_a_int8_per_tensor_sym", "--algorithm",
                                     "smoothquant"};
  std::vector<std::string> awq = {
      "--scheme", "w_uint4_per_group_asym", "--group-size", "32", "--algorithm", "awq"};
  for (auto* args : {&smooth, &awq}) {
    auto cal = Calibration();
    args->insert(args->end(), cal.begin(), cal.end());
    const Job job = Run(*args);
    ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED) << (*args)[1] << ": " << job.error().message();
    const auto& q = job.result().metrics().quantized_perplexity().perplexity();
    const auto& f = job.result().metrics().float_perplexity().perplexity();
    EXPECT_GT(q, 0);
    EXPECT_LT(q, 1.5 * f) << (*args)[1];
  }
}

// --float-starved-experts: expert 3 of block 1 keeps its float weights
// and no activation quantizer, in the metrics and in the export.
TEST_F(MoeE2eTest, AStarvedExpertCanStayInFloat) {
  std::vector<std::string> args = {"--scheme",
                                   "w_int8_a_int8_per_tensor_sym",
                                   "--algorithm",
                                   "gptq",
                                   "--float-starved-experts",
                                   "--format",
                                   "hf-quark",
                                   "--format",
                                   "compressed-tensors"};
  auto cal = Calibration();
  args.insert(args.end(), cal.begin(), cal.end());
  const Job job = Run(args);
  ASSERT_EQ(job.state(), quantd::v1::SUCCEEDED) << job.error().message();
  const auto& block = job.result().metrics().blocks(0);
  ASSERT_EQ(block.experts_size(), kExperts);
  for (const auto& e : block.experts()) EXPECT_EQ(e.kept_float(), e.expert() == 3) << e.expert();
  int float_layers = 0, quantized_experts = 0;
  for (const auto& l : block.layers()) {
    if (l.name().find(".experts.3.") != std::string::npos) {
      EXPECT_TRUE(l.excluded()) << l.name();
      EXPECT_EQ(l.input_format(), "") << l.name();
      ++float_layers;
    } else if (l.name().find(".experts.") != std::string::npos) {
      EXPECT_FALSE(l.excluded()) << l.name();
      ++quantized_experts;
    }
  }
  EXPECT_EQ(float_layers, 3);
  EXPECT_EQ(quantized_experts, 9);
  // Both exports leave its weights unquantized: the reference format's
  // config names them in its exclude list, compressed-tensors' in its
  // ignore list, and only them among the experts.
  ASSERT_EQ(job.result().artifacts_size(), 2);
  for (const auto& artifact : job.result().artifacts()) {
    const std::string config = ReadFile(artifact.uri().substr(7) + "/config.json");
    ASSERT_FALSE(config.empty()) << artifact.uri();
    for (const auto& b : job.result().metrics().blocks()) {
      for (const auto& e : b.experts()) {
        const std::string name = "\"model.layers." + std::to_string(b.block() - 1) +
                                 ".mlp.experts." + std::to_string(e.expert()) + ".down_proj\"";
        EXPECT_EQ(config.find(name) != std::string::npos, e.kept_float())
            << name << " in " << artifact.uri();
      }
    }
  }
}

TEST_F(MoeE2eTest, ExportsWithoutMixtureOfExpertsAreRefusedAtSubmit) {
  CommandResult r = Quantctl(quantd_->address(),
                             {"submit", "--model", *model_, "--scheme", "w_int8_per_channel_sym",
                              "--format", "onnx", "--eval", Text()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("onnx_qdq writes dense Llama-family decoders"), std::string::npos)
      << r.stderr_text;
  r = Quantctl(quantd_->address(),
               {"submit", "--model", *model_, "--scheme", "w_int4_per_channel_asym", "--algorithm",
                "rotation", "--eval", Text()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("mixture-of-experts blocks"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace quantd::e2e
