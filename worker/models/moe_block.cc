// Mixture-of-experts decoder block: Llama's attention (LlamaBlock) and a
// sparse MLP, matching Hugging Face's MixtralSparseMoeBlock
// (models/mixtral/modeling_mixtral.py), Qwen2MoeSparseMoeBlock
// (models/qwen2_moe/modeling_qwen2_moe.py) and Qwen3MoeSparseMoeBlock
// (models/qwen3_moe/modeling_qwen3_moe.py), transformers v4.51: router
// logits, a float32 softmax, each token's top num_experts_per_tok experts
// (their weights renormalised with norm_topk_prob, then cast to the hidden
// dtype), every expert a SwiGLU MLP run on only the tokens routed to it, its
// output times the token's weight summed into place; Qwen2-MoE adds a shared
// expert scaled by sigmoid(shared_expert_gate(x)).
//
// Running each expert on its own tokens is what makes calibration
// routing-aware: a hook on an expert's linear sees exactly those tokens.
#include <cmath>

#include "worker/models/architectures.h"
#include "worker/models/transformer_ops.h"

namespace quantd::models {
namespace {

// Layout order (layer_shapes.cc): q, k, v, o, router, [shared_expert_gate,
// shared gate, up, down], then gate, up, down of each expert; norms input,
// post_attention, then q_norm, k_norm (the attention's are
// DecoderBlock::LlamaAttentionResidual's).
enum { kRouter = 4 };
enum { kPostAttentionNorm = 1 };

class MoeBlock final : public DecoderBlock {
 public:
  MoeBlock(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : DecoderBlock(config, index, options),
        shared_(config.shared_expert_intermediate_size > 0),
        first_expert_(kRouter + 1 + (shared_ ? 4 : 0)),
        routed_(static_cast<size_t>(config.num_experts), 0) {}
  using DecoderBlock::LoadWeights;

  std::vector<int64_t> TakeExpertTokenCounts() override {
    std::vector<int64_t> out(routed_.size(), 0);
    out.swap(routed_);
    return out;
  }

 protected:
  at::Tensor ForwardChunk(const at::Tensor& x) override {
    at::Tensor hidden = LlamaAttentionResidual(x);
    return hidden + SparseMlp(norm(kPostAttentionNorm).Forward(hidden));
  }

 private:
  // down(act(gate(x)) * up(x)) with the three linears from `first`.
  at::Tensor Mlp(size_t first, const at::Tensor& x) {
    at::Tensor gate = Activation(linear(first).Forward(x), config().hidden_act);
    return linear(first + 2).Forward(gate * linear(first + 1).Forward(x));
  }

  at::Tensor SparseMlp(const at::Tensor& normed) {
    const ModelConfig& c = config();
    const int64_t b = normed.size(0), t = normed.size(1), d = normed.size(2);
    const int64_t n = b * t, k = c.num_experts_per_tok, e = c.num_experts;
    // The router sees the block's [B, T, D] activations, as every linear's
    // hooks do; experts get theirs as [1, tokens, D].
    at::Tensor logits = linear(kRouter).Forward(normed).reshape({n, e});
    at::Tensor probs = at::softmax(logits, -1, at::kFloat);
    auto [weights, chosen] = at::topk(probs, k, -1);
    if (c.norm_topk_prob) weights = weights / weights.sum(-1, true);
    weights = weights.to(normed.scalar_type());

    // Each (token, slot) choice grouped by expert: one sort and one count
    // copied to the host, rather than a search per expert.
    const at::Tensor flat = chosen.reshape({-1});
    const at::Tensor order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
    const at::Tensor counts = at::bincount(flat, {}, e).to(at::kCPU);
    const int64_t* count = counts.data_ptr<int64_t>();
    const at::Tensor tokens = order.div(k, "floor");
    const at::Tensor slot_weights = weights.reshape({-1}).index_select(0, order);

    const at::Tensor x = normed.reshape({n, d});
    at::Tensor out = at::zeros({n, d}, normed.options());
    int64_t start = 0;
    for (int64_t i = 0; i < e; ++i) {
      const int64_t m = count[i];
      routed_[i] += m;
      if (m == 0) continue;
      const at::Tensor rows = tokens.narrow(0, start, m);
      at::Tensor y = Mlp(first_expert_ + 3 * i, x.index_select(0, rows).unsqueeze(0)).squeeze(0);
      out.index_add_(0, rows, y * slot_weights.narrow(0, start, m).unsqueeze(1));
      start += m;
    }
    out = out.view({b, t, d});
    if (shared_) {
      at::Tensor scale = at::sigmoid(linear(kRouter + 1).Forward(normed));
      out = out + Mlp(kRouter + 2, normed) * scale;
    }
    return out;
  }

  const bool shared_;
  const size_t first_expert_;
  std::vector<int64_t> routed_;
};

}  // namespace

StatusOr<std::unique_ptr<DecoderBlock>> LoadMoeBlock(const ModelConfig& config, int64_t index,
                                                     const WeightLoader& loader) {
  if (!IsMoeLayer(config, index)) return LoadLlamaBlock(config, index, loader);
  return LoadBlockOf<MoeBlock>(config, index, loader);
}

}  // namespace quantd::models
