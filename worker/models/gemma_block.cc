// Gemma 2 / Gemma 3 decoder block, matching Hugging Face's Gemma2DecoderLayer
// and Gemma3DecoderLayer (models/gemma2/modular_gemma2.py at 213da5a04374,
// models/gemma3/modular_gemma3.py): (1 + weight) RMSNorms before and after
// both the attention and the MLP; attention scores scaled by
// query_pre_attn_scalar^-0.5 and soft-capped (Gemma 2), a sliding window on
// the sliding layers, Gemma 3's q/k norms before the rotary embedding and its
// local rope base on sliding layers; a GeGLU MLP: down(act(gate) * up).
#include <cmath>

#include "worker/models/architectures.h"
#include "worker/models/transformer_ops.h"

namespace quantd::models {
namespace {

// Layout order (layer_shapes.cc): q, k, v, o, gate, up, down; norms input,
// post_attention, pre_feedforward, post_feedforward, then q_norm, k_norm.
enum { kQ, kK, kV, kO, kGate, kUp, kDown };
enum { kInputNorm, kPostAttentionNorm, kPreFeedforwardNorm, kPostFeedforwardNorm, kQNorm, kKNorm };

class GemmaBlock final : public DecoderBlock {
 public:
  GemmaBlock(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : DecoderBlock(config, index, options), rope_config_(RopeConfigAt(config, index)) {}
  using DecoderBlock::LoadWeights;

 protected:
  at::Tensor ForwardChunk(const at::Tensor& x) override {
    const ModelConfig& c = config();
    AttentionOptions ao;
    ao.scale = 1.0 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar
                                                           : static_cast<double>(c.head_dim));
    ao.softcap = c.attn_logit_softcapping;
    ao.sliding_window = SlidingWindowAt(c, index());
    ao.max_score_elements = options().max_attention_elements;
    at::Tensor normed = norm(kInputNorm).Forward(x);
    at::Tensor attn = SeparateQkvAttention(normed, {kQ, kK, kV, kQNorm, kKNorm}, rope_config_,
                                           x.scalar_type(), ao);
    at::Tensor hidden = x + norm(kPostAttentionNorm).Forward(linear(kO).Forward(attn));

    normed = norm(kPreFeedforwardNorm).Forward(hidden);
    at::Tensor gate = Activation(linear(kGate).Forward(normed), c.hidden_act);
    at::Tensor mlp = linear(kDown).Forward(gate * linear(kUp).Forward(normed));
    return hidden + norm(kPostFeedforwardNorm).Forward(mlp);
  }

 private:
  const ModelConfig rope_config_;
};

}  // namespace

StatusOr<std::unique_ptr<DecoderBlock>> LoadGemmaBlock(const ModelConfig& config, int64_t index,
                                                       const WeightLoader& loader) {
  return LoadBlockOf<GemmaBlock>(config, index, loader);
}

}  // namespace quantd::models
