// GPT-2 decoder block, matching Hugging Face's GPT2Block: pre-LayerNorm,
// fused q|k|v projection (c_attn), learned positions added at the embedding,
// GELU MLP. Conv1D weights are held transposed to [out, in] (see
// layer_shapes.h), so every projection is an ordinary Linear.
#include <cmath>

#include "worker/models/architectures.h"
#include "worker/models/transformer_ops.h"

namespace quantd::models {
namespace {

enum { kCAttn, kAttnProj, kFc, kMlpProj };
enum { kLn1, kLn2 };

class Gpt2Block final : public DecoderBlock {
 public:
  Gpt2Block(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : DecoderBlock(config, index, options) {}
  using DecoderBlock::LoadWeights;

 protected:
  at::Tensor ForwardChunk(const at::Tensor& x) override {
    const ModelConfig& c = config();
    const int64_t b = x.size(0), t = x.size(1), d = c.hidden_size;
    const int64_t h = c.num_attention_heads, hd = c.head_dim;

    at::Tensor qkv = linear(kCAttn).Forward(norm(kLn1).Forward(x));
    auto heads = [&](int64_t part) {
      return qkv.narrow(-1, part * d, d).reshape({b, t, h, hd}).transpose(1, 2);
    };
    AttentionOptions ao;
    ao.scale = c.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(hd)) : 1.0;
    if (c.scale_attn_by_inverse_layer_idx) ao.scale /= static_cast<double>(index() + 1);
    ao.max_score_elements = options().max_attention_elements;
    at::Tensor attn =
        CausalSelfAttention(heads(0), heads(1), heads(2), ao).transpose(1, 2).reshape({b, t, d});
    at::Tensor hidden = x + linear(kAttnProj).Forward(attn);

    at::Tensor mlp = Activation(linear(kFc).Forward(norm(kLn2).Forward(hidden)), c.hidden_act);
    return hidden + linear(kMlpProj).Forward(mlp);
  }
};

}  // namespace

StatusOr<std::unique_ptr<DecoderBlock>> LoadGpt2Block(const ModelConfig& config, int64_t index,
                                                      const WeightLoader& loader) {
  return LoadBlockOf<Gpt2Block>(config, index, loader);
}

}  // namespace quantd::models
