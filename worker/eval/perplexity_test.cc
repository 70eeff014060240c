// Perplexity of the real stories260K model on tests/data/tinystories-sample.txt
// against the float64 reference values in tests/golden/stories260K.json, and
// the float-vs-quantized comparison metrics against a direct computation.
#include "worker/eval/perplexity.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/tensor_map_source.h"
#include "worker/io/tokenizer/load_tokenizer.h"
#include "worker/models/registry.h"

namespace quantd::eval {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text tokenized once with the model directory's tokenizer.model.
const std::vector<int32_t>& TextIds(int32_t* bos) {
  static const auto* ids = [] {
    auto tok = io::LoadTokenizerFromDir("models/stories260K");
    if (!tok.ok()) {
      ADD_FAILURE() << tok.status();
      return new std::pair<std::vector<int32_t>, int32_t>({}, -1);
    }
    return new std::pair<std::vector<int32_t>, int32_t>(
        (*tok)->Encode(ReadFile("tests/data/tinystories-sample.txt")), (*tok)->bos_id());
  }();
  *bos = ids->second;
  return ids->first;
}

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = models::OpenCausalLM("models/stories260K");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(m).value();
  }

  static EvalWindows Windows(int64_t n_ctx, int64_t max_windows = 0) {
    int32_t bos = -1;
    const std::vector<int32_t>& ids = TextIds(&bos);
    EXPECT_EQ(bos, 1);
    auto w = MakeEvalWindows(ids, bos, {n_ctx, max_windows});
    EXPECT_TRUE(w.ok()) << w.status();
    return *w;
  }

  std::unique_ptr<models::CausalLM> model_;
};

TEST_F(PerplexityTest, MatchesGoldenAtNctx256And512) {
  const nlohmann::json g = nlohmann::json::parse(
      ReadFile("tests/golden/stories260K.json"))["perplexity"]["tinystories-sample.txt"];
  int32_t bos = -1;
  ASSERT_EQ(TextIds(&bos).size(), g["n_ctx_256"]["all"]["tokens"].get<size_t>());
  EvalOptions opts;
  opts.dataset = "tinystories-sample.txt";
  opts.batch_size = 64;

  auto first20 = EvaluatePerplexity(FromCausalLM(*model_), Windows(256, 20), opts);
  ASSERT_TRUE(first20.ok()) << first20.status();
  EXPECT_EQ(first20->tokens, g["n_ctx_256"]["first_20_windows"]["tokens"].get<int64_t>());
  EXPECT_NEAR(first20->ppl, g["n_ctx_256"]["first_20_windows"]["ppl"].get<double>(), 1e-3);

  auto all256 = EvaluatePerplexity(FromCausalLM(*model_), Windows(256), opts);
  ASSERT_TRUE(all256.ok()) << all256.status();
  EXPECT_NEAR(all256->ppl, 6.9887, 1e-3);
  EXPECT_EQ(all256->tokens, 100707);
  EXPECT_EQ(all256->windows, 395);  // ceil(100707 / 255)
  EXPECT_EQ(all256->n_ctx, 256);
  EXPECT_EQ(all256->dataset, "tinystories-sample.txt");
  EXPECT_THAT(all256->protocol, ::testing::HasSubstr("[BOS] + 255 text tokens"));

  auto all512 = EvaluatePerplexity(FromCausalLM(*model_), Windows(512), opts);
  ASSERT_TRUE(all512.ok()) << all512.status();
  EXPECT_NEAR(all512->ppl, g["n_ctx_512"]["all"]["ppl"].get<double>(), 1e-3);
  EXPECT_NEAR(all512->ppl, 6.6772, 1e-3);
  EXPECT_EQ(all512->tokens, 100707);
  RecordProperty("ppl_256", std::to_string(all256->ppl));
  RecordProperty("ppl_512", std::to_string(all512->ppl));
}

TEST_F(PerplexityTest, ReportsProgressAndStopsWhenCancelled) {
  const EvalWindows w = Windows(64, 4);
  std::vector<EvalProgress> seen;
  EvalOptions opts;
  opts.on_progress = [&](const EvalProgress& p) { seen.push_back(p); };
  ASSERT_TRUE(EvaluatePerplexity(FromCausalLM(*model_), w, opts).ok());
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0].block, 1);
  EXPECT_EQ(seen[4].block, 5);
  EXPECT_EQ(seen[4].num_blocks, 5);

  BlockwiseModel counted = FromCausalLM(*model_);
  int loads = 0;
  auto inner = counted.load_block;
  counted.load_block = [&](int64_t i) {
    ++loads;
    return inner(i);
  };
  opts.on_progress = nullptr;
  opts.cancelled = [&]() { return loads == 2; };
  auto r = EvaluatePerplexity(counted, w, opts);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  // Block 2 was loaded, then the check before its first batch stopped it.
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("in block 2, before batch 1 of 1"));
  EXPECT_EQ(loads, 2);
}

// A block over many windows stops between batches, not at the block's end.
TEST_F(PerplexityTest, StopsBetweenTheBatchesOfABlock) {
  const EvalWindows w = Windows(64, 20);
  EvalOptions opts;
  opts.batch_size = 1;  // 20 batches
  int checks = 0;
  // Checks 1-20 precede the 20 embeddings, 21 block 1, 22-41 its batches:
  // the 30th is the one before block 1's 9th batch.
  opts.cancelled = [&]() { return ++checks == 30; };
  auto r = EvaluatePerplexity(FromCausalLM(*model_), w, opts);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("in block 1, before batch 9 of 20"));
  EXPECT_EQ(checks, 30);

  // And in the head, after every block ran.
  checks = 0;
  int stop_at = 0;
  opts.on_progress = [&](const EvalProgress& p) {
    if (p.block == p.num_blocks) stop_at = checks + 3;
  };
  opts.cancelled = [&]() { return stop_at > 0 && ++checks >= stop_at; };
  r = EvaluatePerplexity(FromCausalLM(*model_), w, opts);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("in the head, before batch 3 of 20"));
}

TEST_F(PerplexityTest, ComparisonMatchesDirectComputation) {
  // The candidate: every linear weight of block 1 rounded to a coarse grid,
  // a stand-in for a quantized block.
  auto overlay = std::make_shared<io::TensorMapSource>("rounded");
  {
    auto block = model_->LoadBlock(1);
    ASSERT_TRUE(block.ok());
    for (models::Linear* l : (*block)->linears()) {
      overlay->Put(l->name() + ".weight", at::round(l->weight() * 8) / 8);
    }
  }
  auto quant_source = std::make_shared<io::OverlaySource>(overlay, model_->shared_weights());
  auto quant = models::LoadCausalLM(model_->config(), quant_source);
  ASSERT_TRUE(quant.ok());

  const EvalWindows w = Windows(32, 6);
  EvalOptions opts;
  opts.batch_size = 4;             // two batches
  opts.max_logit_elements = 3000;  // several head slices per batch
  opts.kl_percentile = 90;
  auto cmp = CompareModels(FromCausalLM(*model_), FromCausalLM(**quant), w, opts);
  ASSERT_TRUE(cmp.ok()) << cmp.status();

  // Direct: whole-model forward of every window, float64 metrics.
  std::vector<double> kls;
  double nll_ref = 0, nll_q = 0;
  int64_t agree = 0, tokens = 0;
  for (const auto& win : w.windows) {
    at::Tensor ids =
        at::tensor(std::vector<int64_t>(win.begin(), win.end()), at::kLong).reshape({1, -1});
    at::Tensor lp = at::log_softmax(model_->Forward(ids)->to(at::kDouble)[0], -1);
    at::Tensor lq = at::log_softmax((*quant)->Forward(ids)->to(at::kDouble)[0], -1);
    for (size_t t = 0; t + 1 < win.size(); ++t) {
      nll_ref -= lp[t][win[t + 1]].item<double>();
      nll_q -= lq[t][win[t + 1]].item<double>();
      kls.push_back((lp[t].exp() * (lp[t] - lq[t])).sum().item<double>());
      agree += lp[t].argmax().item<int64_t>() == lq[t].argmax().item<int64_t>();
      ++tokens;
    }
  }
  std::sort(kls.begin(), kls.end());
  const double pos = 0.9 * (kls.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const double p90 = kls[lo] + (kls[lo + 1] - kls[lo]) * (pos - lo);
  double mean = 0;
  for (double k : kls) mean += k / kls.size();

  EXPECT_EQ(cmp->tokens, tokens);
  EXPECT_EQ(cmp->tokens, w.scored_tokens);
  // Batched vs one-window float32 forwards round differently (~1e-7 relative).
  EXPECT_NEAR(cmp->reference.ppl / std::exp(nll_ref / tokens), 1.0, 1e-5);
  EXPECT_NEAR(cmp->candidate.ppl / std::exp(nll_q / tokens), 1.0, 1e-5);
  EXPECT_GT(cmp->kl_mean, 1e-4);  // the rounding is visible
  EXPECT_NEAR(cmp->kl_mean, mean, 1e-5);
  EXPECT_NEAR(cmp->kl_high, p90, 1e-5);
  EXPECT_NEAR(cmp->kl_max, kls.back(), 2e-5);
  EXPECT_DOUBLE_EQ(cmp->kl_percentile, 90);
  EXPECT_DOUBLE_EQ(cmp->top1_agreement, static_cast<double>(agree) / tokens);

  auto same = CompareModels(FromCausalLM(*model_), FromCausalLM(*model_), w, opts);
  ASSERT_TRUE(same.ok());
  EXPECT_NEAR(same->kl_mean, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(same->top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(same->reference.ppl, same->candidate.ppl);
}

}  // namespace
}  // namespace quantd::eval
