// Phi-3 / Phi-4 decoder block, matching Hugging Face's Phi3DecoderLayer
// (models/phi3/modular_phi3.py at 2b6c089d5a0b): pre-RMSNorm; one qkv_proj
// whose output splits into q, k and v; rotary embedding over the first
// rotary_dim dimensions of each head (partial_rotary_factor); grouped-query
// attention with the config's sliding window on every layer; one
// gate_up_proj whose first half is the gate: down(up * silu(gate)).
#include <cmath>

#include "worker/models/architectures.h"
#include "worker/models/transformer_ops.h"

namespace quantd::models {
namespace {

// Layout order (layer_shapes.cc): qkv, o, gate_up, down; norms input,
// post_attention.
enum { kQkv, kO, kGateUp, kDown };
enum { kInputNorm, kPostAttentionNorm };

class Phi3Block final : public DecoderBlock {
 public:
  Phi3Block(const ModelConfig& config, int64_t index, const ModelOptions& options)
      : DecoderBlock(config, index, options) {}
  using DecoderBlock::LoadWeights;

 protected:
  at::Tensor ForwardChunk(const at::Tensor& x) override {
    const ModelConfig& c = config();
    const int64_t b = x.size(0), t = x.size(1), hd = c.head_dim;
    const int64_t h = c.num_attention_heads, kvh = c.num_key_value_heads;

    at::Tensor qkv = linear(kQkv).Forward(norm(kInputNorm).Forward(x));
    at::Tensor q = qkv.narrow(-1, 0, h * hd).reshape({b, t, h, hd}).transpose(1, 2);
    at::Tensor k = qkv.narrow(-1, h * hd, kvh * hd).reshape({b, t, kvh, hd}).transpose(1, 2);
    at::Tensor v =
        qkv.narrow(-1, (h + kvh) * hd, kvh * hd).reshape({b, t, kvh, hd}).transpose(1, 2);
    const RotaryTables rope = MakeRotaryTables(c, t, x.scalar_type(), x.device());
    q = ApplyRotary(q, rope);
    k = ApplyRotary(k, rope);
    AttentionOptions ao;
    ao.scale = 1.0 / std::sqrt(static_cast<double>(hd));
    ao.sliding_window = SlidingWindowAt(c, index());
    ao.max_score_elements = options().max_attention_elements;
    at::Tensor attn = CausalSelfAttention(q, k, v, ao).transpose(1, 2).reshape({b, t, h * hd});
    at::Tensor hidden = x + linear(kO).Forward(attn);

    const int64_t ffn = c.intermediate_size;
    at::Tensor gate_up = linear(kGateUp).Forward(norm(kPostAttentionNorm).Forward(hidden));
    at::Tensor gate = Activation(gate_up.narrow(-1, 0, ffn), c.hidden_act);
    return hidden + linear(kDown).Forward(gate_up.narrow(-1, ffn, ffn) * gate);
  }
};

}  // namespace

StatusOr<std::unique_ptr<DecoderBlock>> LoadPhi3Block(const ModelConfig& config, int64_t index,
                                                      const WeightLoader& loader) {
  return LoadBlockOf<Phi3Block>(config, index, loader);
}

}  // namespace quantd::models
