// ModelConfig: the architecture hyper-parameters of a Hugging Face model.
//
// Parsed from config.json (or filled in by another importer, e.g. GGUF
// metadata) into one plain struct that the model implementations, the
// torch-free layer listing and the server's submit-time checks all read.
// Field names follow the Llama config; GPT-2 (n_embd, n_layer, ...) and OPT
// (ffn_dim, do_layer_norm_before, ...) keys are mapped onto them. Torch-free.
#ifndef QUANTD_WORKER_MODELS_MODEL_CONFIG_H_
#define QUANTD_WORKER_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::models {

struct RopeScaling {
  // As transformers' modeling_rope_utils.py names them (docs/worker.md):
  //   "linear"   positions divided by factor;
  //   "llama3"   Llama 3.1's frequency bands;
  //   "yarn"     YaRN: interpolated low frequencies, extrapolated high ones,
  //              a ramp between, and cos/sin scaled by an attention factor;
  //   "dynamic"  dynamic NTK: the base grows with a sequence longer than
  //              max_position_embeddings;
  //   "longrope" LongRoPE (Phi-3): per-frequency divisors, short_factor up to
  //              original_max_position_embeddings tokens and long_factor past
  //              it, and an attention factor.
  std::string type;
  double factor = 1.0;
  // llama3.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 and yarn: the pretrained context; longrope: the sequence length
  // past which long_factor applies.
  int64_t original_max_position_embeddings = 8192;
  // yarn.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;  // floor / ceil the correction range
  // yarn and longrope: multiplies cos and sin (always set after parsing).
  double attention_factor = 1.0;
  // longrope: head_dim / 2 divisors each.
  std::vector<double> short_factor;
  std::vector<double> long_factor;
};

// Implementation families; each covers the architectures listed in
// SupportedArchitectures().
enum class ArchitectureFamily { kLlama, kPhi3, kGemma, kGpt2, kOpt };

struct ModelConfig {
  // config.json "architectures"[0], e.g. "LlamaForCausalLM".
  std::string architecture;
  std::string model_type;
  ArchitectureFamily family = ArchitectureFamily::kLlama;

  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // == num_attention_heads without GQA
  int64_t head_dim = 0;             // hidden_size / num_attention_heads unless set
  // The leading dimensions of each head that the rotary embedding turns:
  // head_dim, or Phi-3's int(head_dim * partial_rotary_factor).
  int64_t rotary_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;

  // rms_norm_eps (Llama family) or layer_norm_epsilon (GPT-2); OPT uses 1e-5.
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  // Mistral, and Qwen2 / Qwen3 with use_sliding_window: attend to at most
  // this many previous positions.
  std::optional<int64_t> sliding_window;
  // Qwen2 / Qwen3: which layers slide (the others attend to everything);
  // empty: every layer does (Mistral). Read it through SlidingWindowAt.
  std::vector<bool> sliding_window_layers;

  // "silu", "gelu", "gelu_new", "relu", ...
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2, or Llama attention_bias
  bool o_bias = false;    // Llama attention_bias
  bool mlp_bias = false;  // Llama mlp_bias; GPT-2 and OPT always have biases
  // Qwen3: an RMSNorm over each head's q and k (q_norm, k_norm: [head_dim]
  // weights) after the projections, before the rotary embedding.
  bool qk_norm = false;
  // OLMoE: q_norm and k_norm are over the whole q and k outputs
  // ([num_attention_heads * head_dim] and [num_key_value_heads * head_dim]),
  // before the split into heads.
  bool qk_norm_full_width = false;
  // OLMoE's clip_qkv: q, k (after their norms) and v are clamped to
  // [-clip_qkv, clip_qkv] before the attention; 0: no clamp.
  double clip_qkv = 0;
  // Phi-3 (family kPhi3) fuses q|k|v into self_attn.qkv_proj and gate|up
  // into mlp.gate_up_proj; no biases.

  // Gemma 2 / Gemma 3 (family kGemma): RMSNorms scale by (1 + weight), and
  // sandwich the attention and the MLP (pre and post norms); Gemma 3 adds
  // q/k norms (qk_norm).
  // Attention scores are scaled by query_pre_attn_scalar^-0.5 (0: head_dim).
  double query_pre_attn_scalar = 0;
  // tanh soft-capping: scores = cap * tanh(scores / cap); 0: none.
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;  // on the logits
  // The token embeddings are multiplied by sqrt(hidden_size).
  bool scale_embeddings = false;
  // Gemma 3: the sliding layers' rope base, without rope_scaling (the full
  // layers use rope_theta and rope_scaling); 0: every layer uses rope_theta.
  double rope_local_base_freq = 0;

  // Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE; family kLlama): the
  // MLP of a sparse layer is a router (a Linear to num_experts logits),
  // num_experts SwiGLU experts of moe_intermediate_size, and each token's
  // num_experts_per_tok best experts summed with their softmax weights.
  // num_experts 0: a dense model. Read the layers through IsMoeLayer.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  // Renormalise the chosen experts' weights to sum to 1 (Mixtral always).
  bool norm_topk_prob = false;
  // Qwen2-MoE: one more SwiGLU expert that every token goes through, scaled
  // by sigmoid(shared_expert_gate(x)); 0: none.
  int64_t shared_expert_intermediate_size = 0;
  // Which layers are sparse (the others have a dense Llama MLP of
  // intermediate_size): Qwen's decoder_sparse_step and mlp_only_layers.
  std::vector<bool> moe_layers;

  // OPT.
  bool do_layer_norm_before = true;
  bool final_layer_norm = true;     // absent when _remove_final_layer_norm
  int64_t word_embed_proj_dim = 0;  // == hidden_size unless OPT-350m style
  // GPT-2.
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;

  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;
  std::string torch_dtype;
};

// config.json "architectures" values quantd implements, in the order
// error messages list them.
const std::vector<std::string>& SupportedArchitectures();

// Parses config.json text. `source` names the file in messages.
// FAILED_PRECONDITION (reason INVALID_MODEL_CONFIG) naming the key for a
// missing, mistyped or inconsistent field; UNIMPLEMENTED for a rope_scaling
// type other than linear, llama3, yarn, dynamic and longrope; FAILED_PRECONDITION (reason
// UNSUPPORTED_ARCHITECTURE) listing SupportedArchitectures() when
// "architectures" names none of them.
StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source);

// The sliding window of layer `layer`, 0 when it attends to every earlier
// position.
int64_t SlidingWindowAt(const ModelConfig& config, int64_t layer);

// True when layer `layer` has a mixture-of-experts MLP.
bool IsMoeLayer(const ModelConfig& config, int64_t layer);

// The config layer `layer`'s rotary embedding follows: `config` itself, or
// for a Gemma 3 sliding layer, rope_local_base_freq without rope_scaling.
ModelConfig RopeConfigAt(const ModelConfig& config, int64_t layer);

// Reads `path` (a config.json, or a directory containing one).
StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_MODEL_CONFIG_H_
