// Random-weight Llama-shaped checkpoints, for memory and speed work at real
// layer shapes (models that large cannot be downloaded here).
//
// Writes a Hugging Face directory: config.json (LlamaForCausalLM,
// Qwen3ForCausalLM with its per-head q/k norms, Phi3ForCausalLM with its
// fused qkv_proj / gate_up_proj, Gemma2ForCausalLM / Gemma3ForCausalLM with
// their sandwich norms, MixtralForCausalLM, Qwen2MoeForCausalLM and
// Qwen3MoeForCausalLM with their routers and experts, each with its real
// names) and BF16,
// F16 or F32 safetensors shards with model.safetensors.index.json. Weights
// are uniform with the standard deviation 1/sqrt(in_features) (norm weights
// 1), so activations stay O(1) through many blocks. Values come from a
// seeded xorshift generator and go through the writer's planned mode, so a
// multi-GiB checkpoint is produced at disk speed with one tensor in memory.
// Torch-free.
#ifndef QUANTD_WORKER_MODELS_RANDOM_CHECKPOINT_H_
#define QUANTD_WORKER_MODELS_RANDOM_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/io/safetensors/safetensors_format.h"

namespace quantd::models {

struct RandomCheckpointOptions {
  // Llama-2-7B shapes by default.
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t vocab_size = 32000;
  // 0: hidden_size / num_attention_heads.
  int64_t head_dim = 0;
  bool tie_word_embeddings = false;
  // "llama", "qwen3" (self_attn.q_norm / k_norm, [head_dim], ones), "phi3"
  // (self_attn.qkv_proj, mlp.gate_up_proj), "gemma2" or "gemma3" (pre / post
  // feedforward norms; gemma3's q/k norms; set tie_word_embeddings as Gemma).
  std::string architecture = "llama";
  // "mixtral", "qwen2_moe" (with a shared expert of intermediate_size) and
  // "qwen3_moe" (with qwen3's q/k norms), "olmoe" (q/k norms over the
  // whole q and k outputs): every layer a mixture of num_experts experts of
  // moe_intermediate_size (0, and always for mixtral and olmoe:
  // intermediate_size).
  int64_t num_experts = 8;
  int64_t num_experts_per_tok = 2;
  int64_t moe_intermediate_size = 0;
  // phi3 only: the share of each head's dimensions the rotary embedding turns.
  double partial_rotary_factor = 1.0;
  // gemma2 / gemma3: the sliding window of their sliding layers (0: Gemma's
  // 4096).
  int64_t sliding_window = 0;
  io::SafetensorsDtype dtype = io::SafetensorsDtype::kBF16;
  // Tensors are packed into shards of at most this many bytes (a tensor
  // larger than that gets a shard of its own).
  uint64_t max_shard_bytes = uint64_t{2} << 30;
  uint64_t seed = 1;
};

struct RandomCheckpointInfo {
  uint64_t total_bytes = 0;  // tensor bytes over all shards
  int shards = 0;
};

// Creates `dir` if needed and writes the checkpoint into it.
StatusOr<RandomCheckpointInfo> WriteRandomLlamaCheckpoint(const std::string& dir,
                                                          const RandomCheckpointOptions& options);

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_RANDOM_CHECKPOINT_H_
