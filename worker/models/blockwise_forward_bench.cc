// blockwise_forward_bench: decoder-block forward throughput at Llama-2-7B
// shapes on CPU, against a chain of plain matmuls of the same FLOPs measured
// in the same run.
//
//   bazel run //worker/models:blockwise_forward_bench -- [--tokens=512]
//       [--batch=1] [--iters=3] [--hidden=4096] [--intermediate=11008]
//       [--heads=32] [--kv_heads=32] [--experts=0 --experts_per_tok=2]
//
// The block is built from random weights in memory (one block; no file).
// With --experts=E it is a Mixtral block (a router and E experts of
// --intermediate, each token through --experts_per_tok of them), and its
// linear params count each expert's at experts_per_tok / E: the work a
// token does, so the ratio shows what routing and dispatch cost.
// Block FLOPs = 2 x tokens x linear params + 4 x batch x seq^2 x hidden
// (q.k and p.v). The baseline multiplies a [tokens, hidden] activation by
// [hidden, hidden] matrices in a chain; its time is scaled to the block's
// FLOPs. ratio = block time / baseline time (1.0 = the block runs at plain
// matmul speed; the excess is attention, norms, rotary and activations).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "worker/common/bench_util.h"
#include "worker/io/tensor_map_source.h"
#include "worker/models/registry.h"

int main(int argc, char** argv) {
  using namespace quantd;
  int64_t tokens = 512, batch = 1, iters = 3, hidden = 4096, inter = 11008, heads = 32, kv = 32;
  int64_t experts = 0, experts_per_tok = 2;
  for (int i = 1; i < argc; ++i) {
    if (!bench::IntFlag(argv[i], "--tokens", &tokens) &&
        !bench::IntFlag(argv[i], "--batch", &batch) &&
        !bench::IntFlag(argv[i], "--iters", &iters) &&
        !bench::IntFlag(argv[i], "--hidden", &hidden) &&
        !bench::IntFlag(argv[i], "--intermediate", &inter) &&
        !bench::IntFlag(argv[i], "--heads", &heads) &&
        !bench::IntFlag(argv[i], "--kv_heads", &kv) &&
        !bench::IntFlag(argv[i], "--experts", &experts) &&
        !bench::IntFlag(argv[i], "--experts_per_tok", &experts_per_tok)) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const int64_t seq = tokens / batch;
  models::ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = 1;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.head_dim = hidden / heads;
  c.vocab_size = 32000;
  c.norm_eps = 1e-5;
  if (experts > 0) {
    c.architecture = "MixtralForCausalLM";
    c.num_experts = experts;
    c.num_experts_per_tok = std::min(experts_per_tok, experts);
    c.moe_intermediate_size = inter;
    c.norm_topk_prob = true;
    c.moe_layers = {true};
  }

  auto weights = std::make_shared<io::TensorMapSource>("random block");
  at::manual_seed(0);
  const models::BlockLayout layout = models::GetBlockLayout(c, 0);
  double params = 0;
  for (const auto& l : layout.linears) {
    weights->Put(l.name + ".weight",
                 at::randn({l.out_features, l.in_features}) / std::sqrt(double(l.in_features)));
    const bool expert = l.name.find(".experts.") != std::string::npos;
    params += double(l.out_features * l.in_features) *
              (expert ? double(c.num_experts_per_tok) / double(experts) : 1.0);
  }
  for (const auto& n : layout.norms) weights->Put(n.name + ".weight", at::ones({n.dim}));
  auto model = models::LoadCausalLM(c, weights);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  auto block = (*model)->LoadBlock(0);
  if (!block.ok()) {
    std::fprintf(stderr, "%s\n", block.status().ToString().c_str());
    return 1;
  }
  weights.reset();

  const at::Tensor x = at::randn({batch, seq, hidden});
  const double block_flops = 2.0 * batch * seq * params + 4.0 * batch * double(seq) * seq * hidden;
  (void)(*block)->Forward(x);  // warm-up
  double t0 = bench::NowSeconds();
  for (int64_t i = 0; i < iters; ++i) {
    auto y = (*block)->Forward(x);
    if (!y.ok()) {
      std::fprintf(stderr, "%s\n", y.status().ToString().c_str());
      return 1;
    }
  }
  const double block_s = (bench::NowSeconds() - t0) / iters;

  // Baseline: the same activation through square matmuls, enough of them to
  // take about as long, timed and scaled to the block's FLOPs.
  const at::Tensor w = at::randn({hidden, hidden}) / std::sqrt(double(hidden));
  const at::Tensor a = x.reshape({batch * seq, hidden});
  const int64_t chain = std::max<int64_t>(
      1, static_cast<int64_t>(block_flops / (2.0 * batch * seq * hidden * hidden)));
  at::Tensor y = a.matmul(w);  // warm-up
  t0 = bench::NowSeconds();
  for (int64_t i = 0; i < iters; ++i) {
    y = a;
    for (int64_t k = 0; k < chain; ++k) y = y.matmul(w);
  }
  const double chain_flops = 2.0 * batch * seq * hidden * hidden * chain;
  const double chain_s = (bench::NowSeconds() - t0) / iters * (block_flops / chain_flops);

  std::printf(
      "block: hidden %lld, intermediate %lld, heads %lld/%lld, %lld x %lld tokens, %.1f GFLOP\n",
      (long long)hidden, (long long)inter, (long long)heads, (long long)kv, (long long)batch,
      (long long)seq, block_flops / 1e9);
  if (experts > 0)
    std::printf("mixture of experts: %lld experts, %lld per token (FLOPs of the chosen ones)\n",
                (long long)experts, (long long)c.num_experts_per_tok);
  std::printf("block forward:      %8.3f s  %9.1f tokens/s  %6.1f GFLOPS\n", block_s,
              batch * seq / block_s, block_flops / block_s / 1e9);
  std::printf(
      "matmul chain (x%lld): %8.3f s  %9.1f tokens/s  %6.1f GFLOPS (scaled to the same FLOPs)\n",
      (long long)chain, chain_s, batch * seq / chain_s, block_flops / chain_s / 1e9);
  std::printf("ratio block/matmul-chain time: %.3f\n", block_s / chain_s);
  return 0;
}
