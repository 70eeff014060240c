// Llama-family decoder block (Llama 2/3, Mistral, Qwen2, Qwen3), matching
// Hugging Face's LlamaDecoderLayer: pre-RMSNorm, rotary q/k (rotate-half
// layout), grouped-query attention (all layers or some with a sliding window),
// SwiGLU MLP; Qwen3's per-head q/k RMSNorms before the rotary embedding
// (Qwen3Attention).
#include <cmath>

#include "worker/models/architectures.h"
#include "worker/models/transformer_ops.h"

namespace quantd::models {
namespace {

// Layout order (layer_shapes.cc): q, k, v, o, gate, up, down; norms input,
// post_attention, then q_norm, k_norm when the config has them (the
// attention's are DecoderBlock::LlamaAttentionResidual's).
enum { kGate = 4, kUp, kDown };
enum { kPostAttentionNorm = 1 };

class LlamaBlock final : public DecoderBlock {
 public:
  LlamaBlock(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : DecoderBlock(config, index, options) {}
  using DecoderBlock::LoadWeights;

 protected:
  at::Tensor ForwardChunk(const at::Tensor& x) override {
    const ModelConfig& c = config();
    at::Tensor hidden = LlamaAttentionResidual(x);
    at::Tensor normed = norm(kPostAttentionNorm).Forward(hidden);
    at::Tensor gate = Activation(linear(kGate).Forward(normed), c.hidden_act);
    at::Tensor mlp = linear(kDown).Forward(gate * linear(kUp).Forward(normed));
    return hidden + mlp;
  }
};

}  // namespace

StatusOr<std::unique_ptr<DecoderBlock>> LoadLlamaBlock(const ModelConfig& config, int64_t index,
                                                       const WeightLoader& loader) {
  return LoadBlockOf<LlamaBlock>(config, index, loader);
}

}  // namespace quantd::models
