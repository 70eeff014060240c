// Building blocks shared by the decoder implementations: rotary position
// embeddings (with the rope_scaling types of model_config.h), causal self-attention with
// grouped-query heads and an optional sliding window, and activations.
// Functions may throw c10::Error; DecoderBlock::Forward converts it.
#ifndef QUANTD_WORKER_MODELS_TRANSFORMER_OPS_H_
#define QUANTD_WORKER_MODELS_TRANSFORMER_OPS_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "worker/models/model_config.h"

namespace quantd::models {

// Inverse frequencies theta^(-2i/d), i < d/2 with d = rotary_dim, in float64, with the
// config's rope_scaling applied for a forward pass over `seq_len` positions
// (dynamic and longrope depend on it; the others do not).
std::vector<double> RopeInverseFrequencies(const ModelConfig& config, int64_t seq_len = 0);

// What cos and sin are multiplied by: yarn's and longrope's attention
// factor, else 1.
double RopeAttentionFactor(const ModelConfig& config);

struct RotaryTables {
  at::Tensor cos;  // [T, rotary_dim]
  at::Tensor sin;
};
// Tables for positions 0..seq_len-1 of one forward pass over seq_len
// positions (computed in float64, then cast).
RotaryTables MakeRotaryTables(const ModelConfig& config, int64_t seq_len, at::ScalarType dtype,
                              at::Device device);
// x: [B, heads, T, head_dim], Hugging Face rotate-half layout over the
// tables' rotary_dim leading dimensions; the others pass through.
at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& tables);

struct AttentionOptions {
  double scale = 1.0;          // multiplies q.k
  int64_t sliding_window = 0;  // 0: unlimited
  int64_t max_score_elements = int64_t{1} << 20;
  double softcap = 0;  // scores -> softcap * tanh(scores / softcap); 0: none
};
// q: [B, H, T, hd]; k, v: [B, KVH, T, hd] with H a multiple of KVH (query
// head h uses kv head h / (H/KVH)). Returns [B, H, T, hd]. Softmax runs in
// float32. Scores are materialised in pieces of at most max_score_elements.
at::Tensor CausalSelfAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options);

// "silu"/"swish", "gelu" (erf), "gelu_new"/"gelu_pytorch_tanh"/"gelu_fast"
// (tanh approximation), "relu".
at::Tensor Activation(const at::Tensor& x, const std::string& name);

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_TRANSFORMER_OPS_H_
