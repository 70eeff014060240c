// OPT decoder block, matching Hugging Face's OPTDecoderLayer: LayerNorm
// before (do_layer_norm_before, most sizes) or after (OPT-350m) each
// residual branch, biased projections, ReLU MLP (fc1, fc2).
#include <cmath>

#include "worker/models/architectures.h"
#include "worker/models/transformer_ops.h"

namespace quantd::models {
namespace {

enum { kQ, kK, kV, kOut, kFc1, kFc2 };
enum { kAttnNorm, kFinalNorm };

class OptBlock final : public DecoderBlock {
 public:
  OptBlock(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : DecoderBlock(config, index, options) {}
  using DecoderBlock::LoadWeights;

 protected:
  at::Tensor ForwardChunk(const at::Tensor& x) override {
    const ModelConfig& c = config();
    const bool pre = c.do_layer_norm_before;
    const int64_t b = x.size(0), t = x.size(1), d = c.hidden_size;
    const int64_t h = c.num_attention_heads, hd = c.head_dim;

    at::Tensor in = pre ? norm(kAttnNorm).Forward(x) : x;
    auto heads = [&](int which) {
      return linear(which).Forward(in).view({b, t, h, hd}).transpose(1, 2);
    };
    AttentionOptions ao;
    ao.scale = 1.0 / std::sqrt(static_cast<double>(hd));
    ao.max_score_elements = options().max_attention_elements;
    at::Tensor attn =
        CausalSelfAttention(heads(kQ), heads(kK), heads(kV), ao).transpose(1, 2).reshape({b, t, d});
    at::Tensor hidden = x + linear(kOut).Forward(attn);
    if (!pre) hidden = norm(kAttnNorm).Forward(hidden);

    at::Tensor mlp_in = pre ? norm(kFinalNorm).Forward(hidden) : hidden;
    at::Tensor mlp = linear(kFc2).Forward(Activation(linear(kFc1).Forward(mlp_in), c.hidden_act));
    hidden = hidden + mlp;
    if (!pre) hidden = norm(kFinalNorm).Forward(hidden);
    return hidden;
  }
};

}  // namespace

StatusOr<std::unique_ptr<DecoderBlock>> LoadOptBlock(const ModelConfig& config, int64_t index,
                                                     const WeightLoader& loader) {
  return LoadBlockOf<OptBlock>(config, index, loader);
}

}  // namespace quantd::models
