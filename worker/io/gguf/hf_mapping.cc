#include "worker/io/gguf/hf_mapping.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

namespace quantd::gguf {
namespace {

using nlohmann::json;

struct NamePair {
  const char* gguf;  // without ".weight"/".bias"
  const char* hf;
  LayoutChange change;
};

// Llama's tensor names, which Qwen2 shares (its q/k/v biases are the same
// names with ".bias").
const std::vector<NamePair>& LlamaGlobals() {
  static const auto* names = new std::vector<NamePair>{
      {"token_embd", "model.embed_tokens", LayoutChange::kNone},
      {"output_norm", "model.norm", LayoutChange::kNone},
      {"output", "lm_head", LayoutChange::kNone}};
  return *names;
}

const std::vector<NamePair>& LlamaBlock() {
  static const auto* names = new std::vector<NamePair>{
      {"attn_norm", "input_layernorm", LayoutChange::kNone},
      {"attn_q", "self_attn.q_proj", LayoutChange::kRopeQuery},
      {"attn_k", "self_attn.k_proj", LayoutChange::kRopeKey},
      {"attn_v", "self_attn.v_proj", LayoutChange::kNone},
      {"attn_output", "self_attn.o_proj", LayoutChange::kNone},
      {"ffn_norm", "post_attention_layernorm", LayoutChange::kNone},
      {"ffn_gate", "mlp.gate_proj", LayoutChange::kNone},
      {"ffn_up", "mlp.up_proj", LayoutChange::kNone},
      {"ffn_down", "mlp.down_proj", LayoutChange::kNone}};
  return *names;
}

// Mixture-of-experts names around the experts themselves: the router and
// Qwen2-MoE's shared expert.
struct ExpertNames {
  const char* prefix;  // relative to the block: "mlp.experts."
  const char* gate;    // each expert's, relative to "<prefix><E>."
  const char* up;
  const char* down;
};

constexpr ExpertNames kMixtralExperts = {"block_sparse_moe.experts.", "w1", "w3", "w2"};
constexpr ExpertNames kQwenExperts = {"mlp.experts.", "gate_proj", "up_proj", "down_proj"};

// Llama's names, and Mixtral's router (llama.cpp writes Mixtral as llama
// with experts).
const std::vector<NamePair>& LlamaMoeBlock() {
  static const auto* names = [] {
    auto* v = new std::vector<NamePair>(LlamaBlock());
    v->push_back({"ffn_gate_inp", "block_sparse_moe.gate", LayoutChange::kNone});
    return v;
  }();
  return *names;
}

// Qwen2-MoE: Qwen2's names, the router, the shared expert and its gate.
const std::vector<NamePair>& Qwen2MoeBlock() {
  static const auto* names = [] {
    auto* v = new std::vector<NamePair>(LlamaBlock());
    v->push_back({"ffn_gate_inp", "mlp.gate", LayoutChange::kNone});
    v->push_back({"ffn_gate_inp_shexp", "mlp.shared_expert_gate", LayoutChange::kNone});
    v->push_back({"ffn_gate_shexp", "mlp.shared_expert.gate_proj", LayoutChange::kNone});
    v->push_back({"ffn_up_shexp", "mlp.shared_expert.up_proj", LayoutChange::kNone});
    v->push_back({"ffn_down_shexp", "mlp.shared_expert.down_proj", LayoutChange::kNone});
    return v;
  }();
  return *names;
}

// Qwen3: Llama's names plus the per-head q/k norms.
const std::vector<NamePair>& Qwen3Block() {
  static const auto* names = [] {
    auto* v = new std::vector<NamePair>(LlamaBlock());
    v->push_back({"attn_q_norm", "self_attn.q_norm", LayoutChange::kNone});
    v->push_back({"attn_k_norm", "self_attn.k_norm", LayoutChange::kNone});
    return v;
  }();
  return *names;
}

// Qwen3-MoE: Qwen3's names and the router.
const std::vector<NamePair>& Qwen3MoeBlock() {
  static const auto* names = [] {
    auto* v = new std::vector<NamePair>(Qwen3Block());
    v->push_back({"ffn_gate_inp", "mlp.gate", LayoutChange::kNone});
    return v;
  }();
  return *names;
}

// Phi-3: Llama's names with q|k|v and gate|up fused (llama.cpp's attn_qkv
// and a double-height ffn_up whose first half is the gate).
const std::vector<NamePair>& Phi3Block() {
  static const auto* names =
      new std::vector<NamePair>{{"attn_norm", "input_layernorm", LayoutChange::kNone},
                                {"attn_qkv", "self_attn.qkv_proj", LayoutChange::kNone},
                                {"attn_output", "self_attn.o_proj", LayoutChange::kNone},
                                {"ffn_norm", "post_attention_layernorm", LayoutChange::kNone},
                                {"ffn_up", "mlp.gate_up_proj", LayoutChange::kNone},
                                {"ffn_down", "mlp.down_proj", LayoutChange::kNone}};
  return *names;
}

// Gemma 2: sandwich norms around attention and MLP, every norm stored as
// 1 + w; the output shares the embedding (llama.cpp has no output tensor).
const std::vector<NamePair>& GemmaGlobals() {
  static const auto* names =
      new std::vector<NamePair>{{"token_embd", "model.embed_tokens", LayoutChange::kNone},
                                {"output_norm", "model.norm", LayoutChange::kPlusOne}};
  return *names;
}

const std::vector<NamePair>& Gemma2Block() {
  static const auto* names = new std::vector<NamePair>{
      {"attn_norm", "input_layernorm", LayoutChange::kPlusOne},
      {"attn_q", "self_attn.q_proj", LayoutChange::kNone},
      {"attn_k", "self_attn.k_proj", LayoutChange::kNone},
      {"attn_v", "self_attn.v_proj", LayoutChange::kNone},
      {"attn_output", "self_attn.o_proj", LayoutChange::kNone},
      {"post_attention_norm", "post_attention_layernorm", LayoutChange::kPlusOne},
      {"ffn_norm", "pre_feedforward_layernorm", LayoutChange::kPlusOne},
      {"ffn_gate", "mlp.gate_proj", LayoutChange::kNone},
      {"ffn_up", "mlp.up_proj", LayoutChange::kNone},
      {"ffn_down", "mlp.down_proj", LayoutChange::kNone},
      {"post_ffw_norm", "post_feedforward_layernorm", LayoutChange::kPlusOne}};
  return *names;
}

// Gemma 3: Gemma 2's names plus per-head q/k norms (also 1 + w).
const std::vector<NamePair>& Gemma3Block() {
  static const auto* names = [] {
    auto* v = new std::vector<NamePair>(Gemma2Block());
    v->push_back({"attn_q_norm", "self_attn.q_norm", LayoutChange::kPlusOne});
    v->push_back({"attn_k_norm", "self_attn.k_norm", LayoutChange::kPlusOne});
    return v;
  }();
  return *names;
}

// Gemma 3 may keep a separate output (llama.cpp reads one when present).
const std::vector<NamePair>& Gemma3Globals() {
  static const auto* names = [] {
    auto* v = new std::vector<NamePair>(GemmaGlobals());
    v->push_back({"output", "lm_head", LayoutChange::kNone});
    return v;
  }();
  return *names;
}

const std::vector<NamePair>& Gpt2Globals() {
  static const auto* names = new std::vector<NamePair>{
      {"token_embd", "transformer.wte", LayoutChange::kNone},
      {"position_embd", "transformer.wpe", LayoutChange::kNone},
      {"output_norm", "transformer.ln_f", LayoutChange::kNone},
      {"output", "lm_head", LayoutChange::kNone}};
  return *names;
}

const std::vector<NamePair>& Gpt2Block() {
  static const auto* names = new std::vector<NamePair>{
      {"attn_norm", "ln_1", LayoutChange::kNone},
      {"attn_qkv", "attn.c_attn", LayoutChange::kTranspose},
      {"attn_output", "attn.c_proj", LayoutChange::kTranspose},
      {"ffn_norm", "ln_2", LayoutChange::kNone},
      {"ffn_up", "mlp.c_fc", LayoutChange::kTranspose},
      {"ffn_down", "mlp.c_proj", LayoutChange::kTranspose}};
  return *names;
}

struct ArchNames {
  const char* arch;
  const char* hf_block_prefix;  // "model.layers."
  const std::vector<NamePair>& globals;
  const std::vector<NamePair>& block;
  // Whether q/k rows are in llama.cpp's interleaved RoPE order; when not,
  // the table's kRopeQuery / kRopeKey are no change.
  bool rope_interleaved;
  // The experts' names, for the architectures with them.
  const ExpertNames* experts = nullptr;
};

const std::vector<ArchNames>& Tables() {
  static const auto* tables = new std::vector<ArchNames>{
      {"llama", "model.layers.", LlamaGlobals(), LlamaMoeBlock(), /*rope_interleaved=*/true,
       &kMixtralExperts},
      // llama.cpp's Qwen2 converter keeps Hugging Face's rotate-half rows.
      {"qwen2", "model.layers.", LlamaGlobals(), LlamaBlock(), /*rope_interleaved=*/false},
      {"qwen3", "model.layers.", LlamaGlobals(), Qwen3Block(), /*rope_interleaved=*/false},
      {"qwen2moe", "model.layers.", LlamaGlobals(), Qwen2MoeBlock(), /*rope_interleaved=*/false,
       &kQwenExperts},
      {"qwen3moe", "model.layers.", LlamaGlobals(), Qwen3MoeBlock(), /*rope_interleaved=*/false,
       &kQwenExperts},
      // OLMoE: Qwen3-MoE's names (its q/k norms span the whole projections,
      // stored as they are).
      {"olmoe", "model.layers.", LlamaGlobals(), Qwen3MoeBlock(), /*rope_interleaved=*/false,
       &kQwenExperts},
      {"phi3", "model.layers.", LlamaGlobals(), Phi3Block(), /*rope_interleaved=*/false},
      {"gemma2", "model.layers.", GemmaGlobals(), Gemma2Block(), /*rope_interleaved=*/false},
      {"gemma3", "model.layers.", Gemma3Globals(), Gemma3Block(), /*rope_interleaved=*/false},
      {"gpt2", "transformer.h.", Gpt2Globals(), Gpt2Block(), /*rope_interleaved=*/false},
  };
  return *tables;
}

const ArchNames* FindArch(std::string_view arch) {
  for (const auto& t : Tables()) {
    if (arch == t.arch) return &t;
  }
  return nullptr;
}

// Splits "x.weight" into ("x", ".weight"); suffix is empty when neither.
std::pair<std::string_view, std::string_view> SplitSuffix(std::string_view name) {
  for (std::string_view suffix : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      return {name.substr(0, name.size() - suffix.size()), suffix};
    }
  }
  return {name, {}};
}

// Parses "<prefix><N>.<rest>" into N and rest.
bool ParseBlock(std::string_view name, std::string_view prefix, std::string* index,
                std::string_view* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits > 9 || digits >= name.size() || name[digits] != '.') return false;
  *index = std::string(name.substr(0, digits));
  *rest = name.substr(digits + 1);
  return true;
}

// Weights change layout; a 1-D bias only changes for the RoPE permutation.
LayoutChange ChangeFor(const ArchNames& t, const NamePair& p, std::string_view suffix) {
  if ((p.change == LayoutChange::kTranspose || p.change == LayoutChange::kPlusOne) &&
      suffix != ".weight") {
    return LayoutChange::kNone;
  }
  const bool rope = p.change == LayoutChange::kRopeQuery || p.change == LayoutChange::kRopeKey;
  if (rope && !t.rope_interleaved) return LayoutChange::kNone;
  return p.change;
}

// Shortest decimal that reads back as the same float32, so config.json shows
// 1e-05 rather than 9.999999747378752e-06.
double ShortestFloat32(double v) {
  const float f = static_cast<float>(v);
  char buf[64];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) return std::strtod(buf, nullptr);
  }
  return f;
}

StatusOr<int64_t> RequiredInt(const GgufFile& f, const std::string& key) {
  auto v = f.GetInt(key);
  if (!v.ok()) {
    return InvalidArgumentError(f.where() + ": cannot build config.json: " + v.status().message());
  }
  return *v;
}

Status AddSpecialTokens(const GgufFile& f, json* cfg) {
  QD_ASSIGN_OR_RETURN(int64_t bos, f.GetIntOr("tokenizer.ggml.bos_token_id", -1));
  QD_ASSIGN_OR_RETURN(int64_t eos, f.GetIntOr("tokenizer.ggml.eos_token_id", -1));
  // 0xFFFFFFFF is llama.cpp's "none".
  if (bos >= 0 && bos < 0xFFFFFFFFll) (*cfg)["bos_token_id"] = bos;
  if (eos >= 0 && eos < 0xFFFFFFFFll) (*cfg)["eos_token_id"] = eos;
  return OkStatus();
}

StatusOr<int64_t> VocabSize(const GgufFile& f, const std::string& arch) {
  if (const GgufTensorInfo* emb = f.FindTensor("token_embd.weight"); emb && emb->ne.size() == 2) {
    return emb->ne[1];
  }
  if (f.Find(arch + ".vocab_size")) return f.GetInt(arch + ".vocab_size");
  if (const GgufValue* tokens = f.Find("tokenizer.ggml.tokens")) {
    return static_cast<int64_t>(tokens->array_size());
  }
  return InvalidArgumentError(f.where() + ": cannot tell the vocabulary size");
}

// What llama.cpp's gemma2 / gemma3 take from the metadata or assume
// (src/models/gemma2.cpp, gemma3.cpp), as Gemma's config.json keys.
Status AddGemmaConfig(const GgufFile& f, const std::string& arch, json* cfg) {
  const bool gemma2 = arch == "gemma2";
  const int64_t hidden = (*cfg)["hidden_size"];
  const int64_t heads = (*cfg)["num_attention_heads"];
  const int64_t layers = (*cfg)["num_hidden_layers"];
  QD_ASSIGN_OR_RETURN(int64_t head_dim, f.GetIntOr(arch + ".attention.key_length", hidden / heads));
  (*cfg)["head_dim"] = head_dim;
  (*cfg)["hidden_activation"] = "gelu_pytorch_tanh";
  (*cfg)["hidden_act"] = "gelu_pytorch_tanh";
  // llama.cpp scales queries by head_dim^-0.5, or (hidden / heads)^-0.5 for
  // the 27B models, which it knows by their layer count.
  const bool is_27b = layers == (gemma2 ? 46 : 62);
  (*cfg)["query_pre_attn_scalar"] = is_27b ? hidden / heads : head_dim;
  if (gemma2) {
    QD_ASSIGN_OR_RETURN(double attn, f.GetFloatOr(arch + ".attn_logit_softcapping", 50));
    QD_ASSIGN_OR_RETURN(double final_cap, f.GetFloatOr(arch + ".final_logit_softcapping", 30));
    (*cfg)["attn_logit_softcapping"] = ShortestFloat32(attn);
    (*cfg)["final_logit_softcapping"] = ShortestFloat32(final_cap);
  } else {
    QD_ASSIGN_OR_RETURN(double final_cap, f.GetFloatOr(arch + ".final_logit_softcapping", 0));
    (*cfg)["attn_logit_softcapping"] = nullptr;
    (*cfg)["final_logit_softcapping"] = final_cap > 0 ? json(ShortestFloat32(final_cap)) : json();
  }
  // Sliding layers: those with il % period < period - 1 (llama.cpp's
  // set_swa_pattern), with period 2 (gemma2) or 6 (gemma3) by default.
  QD_ASSIGN_OR_RETURN(int64_t window,
                      f.GetIntOr(arch + ".attention.sliding_window", gemma2 ? 4096 : 0));
  QD_ASSIGN_OR_RETURN(int64_t period,
                      f.GetIntOr(arch + ".attention.sliding_window_pattern", gemma2 ? 2 : 6));
  json types = json::array();
  for (int64_t il = 0; il < layers; ++il) {
    const bool slides = window > 0 && (period == 0 || il % period < period - 1);
    types.push_back(slides ? "sliding_attention" : "full_attention");
  }
  (*cfg)["sliding_window"] = window > 0 ? json(window) : json();
  (*cfg)["layer_types"] = types;
  if (!gemma2) {
    QD_ASSIGN_OR_RETURN(double local_base, f.GetFloatOr(arch + ".rope.freq_base_swa", 10000));
    (*cfg)["rope_local_base_freq"] = ShortestFloat32(local_base);
  }
  return OkStatus();
}

StatusOr<json> LlamaLikeConfig(const GgufFile& f, const std::string& arch) {
  json cfg;
  const bool qwen = arch == "qwen2";
  cfg["architectures"] = json::array({arch == "qwen2"    ? "Qwen2ForCausalLM"
                                      : arch == "qwen3"  ? "Qwen3ForCausalLM"
                                      : arch == "phi3"   ? "Phi3ForCausalLM"
                                      : arch == "gemma2" ? "Gemma2ForCausalLM"
                                      : arch == "gemma3" ? "Gemma3ForCausalLM"
                                                         : "LlamaForCausalLM"});
  cfg["model_type"] = arch == "gemma3" ? "gemma3_text" : arch;
  QD_ASSIGN_OR_RETURN(int64_t hidden, RequiredInt(f, arch + ".embedding_length"));
  QD_ASSIGN_OR_RETURN(int64_t ffn, RequiredInt(f, arch + ".feed_forward_length"));
  QD_ASSIGN_OR_RETURN(int64_t layers, RequiredInt(f, arch + ".block_count"));
  QD_ASSIGN_OR_RETURN(int64_t heads, RequiredInt(f, arch + ".attention.head_count"));
  QD_ASSIGN_OR_RETURN(int64_t kv_heads, f.GetIntOr(arch + ".attention.head_count_kv", heads));
  QD_ASSIGN_OR_RETURN(int64_t ctx, f.GetIntOr(arch + ".context_length", 2048));
  QD_ASSIGN_OR_RETURN(double eps, f.GetFloatOr(arch + ".attention.layer_norm_rms_epsilon", 1e-5));
  QD_ASSIGN_OR_RETURN(double theta, f.GetFloatOr(arch + ".rope.freq_base", 10000.0));
  QD_ASSIGN_OR_RETURN(int64_t vocab, VocabSize(f, arch));
  if (heads <= 0 || kv_heads <= 0 || hidden % heads != 0 || heads % kv_heads != 0) {
    return InvalidArgumentError(f.where() + ": inconsistent attention heads (" +
                                std::to_string(heads) + " heads, " + std::to_string(kv_heads) +
                                " kv heads, hidden size " + std::to_string(hidden) + ")");
  }
  cfg["hidden_size"] = hidden;
  cfg["intermediate_size"] = ffn;
  cfg["num_hidden_layers"] = layers;
  cfg["num_attention_heads"] = heads;
  cfg["num_key_value_heads"] = kv_heads;
  cfg["vocab_size"] = vocab;
  cfg["max_position_embeddings"] = ctx;
  cfg["rms_norm_eps"] = ShortestFloat32(eps);
  cfg["rope_theta"] = ShortestFloat32(theta);
  cfg["hidden_act"] = "silu";
  QD_ASSIGN_OR_RETURN(int64_t head_dim, f.GetIntOr(arch + ".attention.key_length", hidden / heads));
  if (head_dim != hidden / heads) cfg["head_dim"] = head_dim;
  if (arch == "phi3") {
    // Phi-4-mini turns only the leading rope.dimension_count dimensions.
    QD_ASSIGN_OR_RETURN(int64_t rot, f.GetIntOr(arch + ".rope.dimension_count", head_dim));
    if (rot <= 0 || rot > head_dim || rot % 2 != 0) {
      return InvalidArgumentError(f.where() + ": " + arch + ".rope.dimension_count " +
                                  std::to_string(rot) + " does not fit head_dim " +
                                  std::to_string(head_dim));
    }
    if (rot != head_dim) cfg["partial_rotary_factor"] = static_cast<double>(rot) / head_dim;
    if (f.FindTensor("rope_factors_long.weight") || f.FindTensor("rope_factors_short.weight")) {
      return UnimplementedError(f.where() +
                                ": LongRoPE factor tensors (rope_factors_long / short) are not "
                                "read here; load the Hugging Face checkpoint instead");
    }
  }
  if (f.Find(arch + ".rope.scaling.type")) {
    QD_ASSIGN_OR_RETURN(std::string type, f.GetString(arch + ".rope.scaling.type"));
    if (type == "linear" || type == "yarn") {
      QD_ASSIGN_OR_RETURN(double factor, f.GetFloat(arch + ".rope.scaling.factor"));
      json scaling = {{"type", type}, {"rope_type", type}, {"factor", ShortestFloat32(factor)}};
      if (type == "yarn") {
        QD_ASSIGN_OR_RETURN(int64_t orig, f.GetInt(arch + ".rope.scaling.original_context_length"));
        scaling["original_max_position_embeddings"] = orig;
        QD_ASSIGN_OR_RETURN(double beta_fast,
                            f.GetFloatOr(arch + ".rope.scaling.yarn_beta_fast", 32));
        QD_ASSIGN_OR_RETURN(double beta_slow,
                            f.GetFloatOr(arch + ".rope.scaling.yarn_beta_slow", 1));
        scaling["beta_fast"] = ShortestFloat32(beta_fast);
        scaling["beta_slow"] = ShortestFloat32(beta_slow);
        // llama.cpp multiplies these into YaRN's attention factor in ways
        // config.json has no one key for.
        QD_ASSIGN_OR_RETURN(double attn, f.GetFloatOr(arch + ".rope.scaling.attn_factor", 1));
        QD_ASSIGN_OR_RETURN(double log_mul,
                            f.GetFloatOr(arch + ".rope.scaling.yarn_log_multiplier", 0));
        if (attn != 1 || log_mul != 0) {
          return UnimplementedError(f.where() +
                                    ": YaRN with rope.scaling.attn_factor or "
                                    "yarn_log_multiplier has no config.json equivalent here");
        }
      }
      cfg["rope_scaling"] = scaling;
    } else if (type != "none") {
      return UnimplementedError(f.where() + ": rope scaling type " + type +
                                " has no config.json equivalent here");
    }
  }
  if (f.FindTensor("rope_freqs.weight")) {
    // Llama 3.1's rope_scaling is baked into this tensor; its parameters are
    // not in the metadata, so config.json cannot restate them.
    return UnimplementedError(f.where() +
                              ": rope_freqs.weight (llama3 rope scaling) cannot be expressed as "
                              "config.json rope_scaling; load the Hugging Face checkpoint instead");
  }
  if (arch == "gemma2" || arch == "gemma3") QD_RETURN_IF_ERROR(AddGemmaConfig(f, arch, &cfg));
  if (!qwen && f.FindTensor("blk.0.attn_q.bias")) cfg["attention_bias"] = true;
  cfg["tie_word_embeddings"] = f.FindTensor("output.weight") == nullptr;
  QD_RETURN_IF_ERROR(AddSpecialTokens(f, &cfg));
  cfg["torch_dtype"] = "float32";
  return cfg;
}

StatusOr<json> Gpt2Config(const GgufFile& f) {
  json cfg;
  cfg["architectures"] = json::array({"GPT2LMHeadModel"});
  cfg["model_type"] = "gpt2";
  QD_ASSIGN_OR_RETURN(int64_t hidden, RequiredInt(f, "gpt2.embedding_length"));
  QD_ASSIGN_OR_RETURN(int64_t ffn, RequiredInt(f, "gpt2.feed_forward_length"));
  QD_ASSIGN_OR_RETURN(int64_t layers, RequiredInt(f, "gpt2.block_count"));
  QD_ASSIGN_OR_RETURN(int64_t heads, RequiredInt(f, "gpt2.attention.head_count"));
  QD_ASSIGN_OR_RETURN(int64_t ctx, RequiredInt(f, "gpt2.context_length"));
  QD_ASSIGN_OR_RETURN(double eps, f.GetFloatOr("gpt2.attention.layer_norm_epsilon", 1e-5));
  QD_ASSIGN_OR_RETURN(int64_t vocab, VocabSize(f, "gpt2"));
  cfg["n_embd"] = hidden;
  cfg["n_inner"] = ffn;
  cfg["n_layer"] = layers;
  cfg["n_head"] = heads;
  cfg["n_positions"] = ctx;
  cfg["n_ctx"] = ctx;
  cfg["vocab_size"] = vocab;
  cfg["layer_norm_epsilon"] = ShortestFloat32(eps);
  cfg["activation_function"] = "gelu_new";
  cfg["tie_word_embeddings"] = f.FindTensor("output.weight") == nullptr;
  QD_RETURN_IF_ERROR(AddSpecialTokens(f, &cfg));
  cfg["torch_dtype"] = "float32";
  return cfg;
}

}  // namespace

bool IsMappedArchitecture(std::string_view arch) { return FindArch(arch) != nullptr; }

std::optional<int64_t> LlamaCppSlidingPeriod(const std::vector<bool>& sliding) {
  const int64_t n = static_cast<int64_t>(sliding.size());
  for (int64_t period = 0; period <= std::max<int64_t>(n, 1); ++period) {
    bool same = true;
    for (int64_t il = 0; il < n && same; ++il) {
      same = sliding[il] == (period == 0 || il % period < period - 1);
    }
    if (same) return period;
  }
  return std::nullopt;
}

std::optional<TensorNameMapping> GgufToHfTensorName(std::string_view arch,
                                                    std::string_view gguf_name) {
  const ArchNames* t = FindArch(arch);
  if (!t) return std::nullopt;
  auto [base, suffix] = SplitSuffix(gguf_name);
  if (suffix.empty()) return std::nullopt;
  for (const auto& p : t->globals) {
    if (base == p.gguf)
      return TensorNameMapping{std::string(p.hf) + std::string(suffix), ChangeFor(*t, p, suffix)};
  }
  std::string index;
  std::string_view rest;
  if (!ParseBlock(base, "blk.", &index, &rest)) return std::nullopt;
  for (const auto& p : t->block) {
    if (rest == p.gguf) {
      return TensorNameMapping{t->hf_block_prefix + index + "." + p.hf + std::string(suffix),
                               ChangeFor(*t, p, suffix)};
    }
  }
  return std::nullopt;
}

std::optional<TensorNameMapping> HfToGgufTensorName(std::string_view arch,
                                                    std::string_view hf_name) {
  const ArchNames* t = FindArch(arch);
  if (!t) return std::nullopt;
  auto [base, suffix] = SplitSuffix(hf_name);
  if (suffix.empty()) return std::nullopt;
  for (const auto& p : t->globals) {
    if (base == p.hf)
      return TensorNameMapping{std::string(p.gguf) + std::string(suffix), ChangeFor(*t, p, suffix)};
  }
  std::string index;
  std::string_view rest;
  if (!ParseBlock(base, t->hf_block_prefix, &index, &rest)) return std::nullopt;
  for (const auto& p : t->block) {
    if (rest == p.hf) {
      TensorNameMapping m{"blk." + index + "." + p.gguf + std::string(suffix),
                          ChangeFor(*t, p, suffix)};
      m.squeeze = std::string_view(p.gguf) == "ffn_gate_inp_shexp";
      return m;
    }
  }
  // "<experts prefix><E>.<role>" -> expert E of blk.N.ffn_<role>_exps.
  const ExpertNames* e = t->experts;
  std::string expert;
  std::string_view role;
  if (e == nullptr || suffix != ".weight" || !ParseBlock(rest, e->prefix, &expert, &role)) {
    return std::nullopt;
  }
  const char* gguf = role == e->gate   ? "ffn_gate_exps"
                     : role == e->up   ? "ffn_up_exps"
                     : role == e->down ? "ffn_down_exps"
                                       : nullptr;
  if (gguf == nullptr) return std::nullopt;
  TensorNameMapping m{"blk." + index + "." + gguf + ".weight", LayoutChange::kNone};
  m.expert = std::stoll(expert);
  return m;
}

StatusOr<std::string> BuildHfConfigJson(const GgufFile& file) {
  auto arch = file.GetString("general.architecture");
  if (!arch.ok()) {
    return InvalidArgumentError(file.where() +
                                ": general.architecture: " + arch.status().message());
  }
  if (auto experts = file.GetIntOr(*arch + ".expert_count", 0); experts.ok() && *experts > 0) {
    return UnimplementedError(file.where() +
                              ": a mixture-of-experts GGUF file is not read as a model here; "
                              "load the Hugging Face checkpoint instead");
  }
  json cfg;
  if (*arch == "llama" || *arch == "qwen2" || *arch == "qwen3" || *arch == "phi3" ||
      *arch == "gemma2" || *arch == "gemma3") {
    QD_ASSIGN_OR_RETURN(cfg, LlamaLikeConfig(file, *arch));
  } else if (*arch == "gpt2") {
    QD_ASSIGN_OR_RETURN(cfg, Gpt2Config(file));
  } else {
    return UnimplementedError(
        file.where() + ": GGUF architecture '" + *arch +
        "' is not supported (supported: llama, qwen2, qwen3, phi3, gemma2, gemma3, "
        "gpt2)");
  }
  return cfg.dump(2);
}

}  // namespace quantd::gguf
