#include "worker/models/model_config.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"

namespace quantd::models {
namespace {

using nlohmann::json;

// Bounds that keep a hostile config.json from requesting absurd allocations;
// they are far above any real model.
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxExperts = 4096;
// Experts over all layers: each is three Linears that the server lists at
// submit time, so a hostile config must not ask for millions. Real models
// stay far below (Qwen3-235B-A22B: 128 x 94 = 12032).
constexpr int64_t kMaxExpertsTimesLayers = 32768;

Status BadConfig(const std::string& source, const std::string& key, const std::string& what) {
  return Status(StatusCode::kFailedPrecondition, source + ": \"" + key + "\" " + what,
                "INVALID_MODEL_CONFIG");
}

struct Reader {
  const json& j;
  const std::string& source;

  bool Has(const char* key) const {
    auto it = j.find(key);
    return it != j.end() && !it->is_null();
  }

  StatusOr<int64_t> Int(const char* key, std::optional<int64_t> fallback, int64_t lo = 1,
                        int64_t hi = kMaxDim) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (fallback) return *fallback;
      return BadConfig(source, key, "is required");
    }
    if (!it->is_number_integer() && !it->is_number_unsigned()) {
      return BadConfig(source, key, "must be an integer, got " + it->dump());
    }
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return BadConfig(
          source, key,
          "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + it->dump());
    }
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) {
      return BadConfig(
          source, key,
          "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + it->dump());
    }
    return v;
  }

  StatusOr<double> Double(const char* key, double fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number()) return BadConfig(source, key, "must be a number, got " + it->dump());
    return it->get<double>();
  }

  StatusOr<bool> Bool(const char* key, bool fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean())
      return BadConfig(source, key, "must be true or false, got " + it->dump());
    return it->get<bool>();
  }

  StatusOr<std::string> String(const char* key, const std::string& fallback) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_string()) return BadConfig(source, key, "must be a string, got " + it->dump());
    return it->get<std::string>();
  }

  // bos/eos ids may be an int, a list of ints (first wins) or null.
  int32_t TokenId(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) return -1;
    const json* v = &*it;
    if (v->is_array() && !v->empty()) v = &(*v)[0];
    if (v->is_number_integer() || v->is_number_unsigned()) {
      const int64_t id = v->get<int64_t>();
      if (id >= 0 && id < kMaxDim) return static_cast<int32_t>(id);
    }
    return -1;
  }
};

struct ArchitectureRow {
  const char* architecture;
  const char* model_type;
  ArchitectureFamily family;
};

constexpr ArchitectureRow kArchitectures[] = {
    {"LlamaForCausalLM", "llama", ArchitectureFamily::kLlama},
    {"MistralForCausalLM", "mistral", ArchitectureFamily::kLlama},
    {"Qwen2ForCausalLM", "qwen2", ArchitectureFamily::kLlama},
    {"Qwen3ForCausalLM", "qwen3", ArchitectureFamily::kLlama},
    {"MixtralForCausalLM", "mixtral", ArchitectureFamily::kLlama},
    {"Qwen2MoeForCausalLM", "qwen2_moe", ArchitectureFamily::kLlama},
    {"Qwen3MoeForCausalLM", "qwen3_moe", ArchitectureFamily::kLlama},
    {"Phi3ForCausalLM", "phi3", ArchitectureFamily::kPhi3},
    {"Gemma2ForCausalLM", "gemma2", ArchitectureFamily::kGemma},
    {"Gemma3ForCausalLM", "gemma3_text", ArchitectureFamily::kGemma},
    {"GPT2LMHeadModel", "gpt2", ArchitectureFamily::kGpt2},
    {"OPTForCausalLM", "opt", ArchitectureFamily::kOpt},
    {"OlmoeForCausalLM", "olmoe", ArchitectureFamily::kLlama},
};

std::string SupportedList() {
  std::string s;
  for (const auto& a : SupportedArchitectures()) s += (s.empty() ? "" : ", ") + a;
  return s;
}

// YaRN's attention factor as transformers computes it when the config gives
// none: 0.1 * mscale * ln(scale) + 1 for scale > 1.
double YarnMscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

StatusOr<std::vector<double>> RopeFactorList(const Reader& rs, const char* key, int64_t want) {
  auto it = rs.j.find(key);
  const std::string field = std::string("rope_scaling.") + key;
  if (it == rs.j.end() || it->is_null()) return BadConfig(rs.source, field, "is required");
  if (!it->is_array() || static_cast<int64_t>(it->size()) != want) {
    return BadConfig(
        rs.source, field,
        "must be a list of " + std::to_string(want) + " numbers (the rotary dimensions / 2)");
  }
  std::vector<double> out;
  for (const json& v : *it) {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
      return BadConfig(rs.source, field, "must hold positive numbers, got " + v.dump());
    }
    out.push_back(v.get<double>());
  }
  return out;
}

// A positive, finite number (absent: `fallback`, which may be NaN to mean
// "not given").
StatusOr<double> PositiveDouble(const Reader& rs, const char* key, double fallback) {
  QD_ASSIGN_OR_RETURN(double v, rs.Double(key, fallback));
  if (std::isnan(v) && std::isnan(fallback)) return v;
  if (!(v > 0) || !std::isfinite(v)) {
    return BadConfig(rs.source, std::string("rope_scaling.") + key, "must be a positive number");
  }
  return v;
}

// rope_scaling (Llama family), after head_dim and max_position_embeddings
// are known. The parameters and their defaults follow transformers'
// modeling_rope_utils.py (docs/worker.md cites the version).
Status ParseRopeScaling(const Reader& r, ModelConfig& c) {
  auto it = r.j.find("rope_scaling");
  if (it == r.j.end() || it->is_null()) return OkStatus();
  if (!it->is_object()) return BadConfig(r.source, "rope_scaling", "must be an object or null");
  Reader rs{*it, r.source};
  QD_ASSIGN_OR_RETURN(std::string type, rs.String("rope_type", ""));
  if (type.empty()) {
    QD_ASSIGN_OR_RETURN(type, rs.String("type", "default"));
  }
  // Phi3Config reads its older names "su" and "yarn" as longrope.
  if (c.family == ArchitectureFamily::kPhi3 && (type == "su" || type == "yarn")) type = "longrope";
  if (type == "default") return OkStatus();
  static const char* kTypes[] = {"linear", "llama3", "yarn", "dynamic", "longrope"};
  bool known = false;
  for (const char* t : kTypes) known |= type == t;
  if (!known) {
    return UnimplementedError(r.source + ": rope_scaling type \"" + type +
                              "\" is not supported (supported: linear, llama3, yarn, dynamic, "
                              "longrope)");
  }
  const double kUnset = std::nan("");
  RopeScaling s;
  s.type = type;
  if (type == "longrope") {
    const int64_t half = c.rotary_dim / 2;
    QD_ASSIGN_OR_RETURN(s.short_factor, RopeFactorList(rs, "short_factor", half));
    QD_ASSIGN_OR_RETURN(s.long_factor, RopeFactorList(rs, "long_factor", half));
    QD_ASSIGN_OR_RETURN(double factor, PositiveDouble(rs, "factor", kUnset));
    QD_ASSIGN_OR_RETURN(double attention, PositiveDouble(rs, "attention_factor", kUnset));
    // Phi-3 keeps the pretrained context at the top level and derives the
    // factor from it; without it the whole max_position_embeddings is short.
    // Phi3Config always has one (default 4096).
    const bool phi3 = c.family == ArchitectureFamily::kPhi3;
    if (phi3 || r.Has("original_max_position_embeddings")) {
      QD_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                          r.Int("original_max_position_embeddings",
                                phi3 ? std::optional<int64_t>(4096) : std::nullopt, 2));
      factor = static_cast<double>(c.max_position_embeddings) /
               static_cast<double>(s.original_max_position_embeddings);
    } else {
      s.original_max_position_embeddings = c.max_position_embeddings;
    }
    if (std::isnan(attention) && std::isnan(factor)) {
      return BadConfig(r.source, "rope_scaling",
                       "needs factor or attention_factor for longrope (or a top-level "
                       "original_max_position_embeddings)");
    }
    s.factor = std::isnan(factor) ? 1.0 : factor;
    s.attention_factor =
        !std::isnan(attention) ? attention
        : s.factor <= 1.0
            ? 1.0
            : std::sqrt(1 + std::log(s.factor) /
                                std::log(static_cast<double>(s.original_max_position_embeddings)));
    c.rope_scaling = s;
    return OkStatus();
  }
  QD_ASSIGN_OR_RETURN(s.factor, PositiveDouble(rs, "factor", kUnset));
  if (std::isnan(s.factor)) return BadConfig(r.source, "rope_scaling.factor", "is required");
  if (type == "llama3") {
    QD_ASSIGN_OR_RETURN(s.low_freq_factor, rs.Double("low_freq_factor", 1.0));
    QD_ASSIGN_OR_RETURN(s.high_freq_factor, rs.Double("high_freq_factor", 4.0));
    QD_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                        rs.Int("original_max_position_embeddings", 8192));
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0)) {
      return BadConfig(r.source, "rope_scaling",
                       "needs 0 < low_freq_factor < high_freq_factor for llama3");
    }
  } else if (type == "yarn") {
    QD_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                        rs.Int("original_max_position_embeddings", c.max_position_embeddings, 2));
    // transformers reads these with `or`, so 0 or null means the default.
    QD_ASSIGN_OR_RETURN(s.beta_fast, rs.Double("beta_fast", 32.0));
    QD_ASSIGN_OR_RETURN(s.beta_slow, rs.Double("beta_slow", 1.0));
    if (s.beta_fast == 0) s.beta_fast = 32.0;
    if (s.beta_slow == 0) s.beta_slow = 1.0;
    if (!(s.beta_fast > 0) || !(s.beta_slow > 0) || !std::isfinite(s.beta_fast) ||
        !std::isfinite(s.beta_slow)) {
      return BadConfig(r.source, "rope_scaling", "needs positive beta_fast and beta_slow");
    }
    QD_ASSIGN_OR_RETURN(s.truncate, rs.Bool("truncate", true));
    QD_ASSIGN_OR_RETURN(double attention, PositiveDouble(rs, "attention_factor", kUnset));
    QD_ASSIGN_OR_RETURN(double mscale, rs.Double("mscale", 0.0));
    QD_ASSIGN_OR_RETURN(double mscale_all_dim, rs.Double("mscale_all_dim", 0.0));
    if (!std::isnan(attention)) {
      s.attention_factor = attention;
    } else if (mscale != 0 && mscale_all_dim != 0) {
      s.attention_factor = YarnMscale(s.factor, mscale) / YarnMscale(s.factor, mscale_all_dim);
    } else {
      s.attention_factor = YarnMscale(s.factor, 1.0);
    }
    if (!(s.attention_factor > 0) || !std::isfinite(s.attention_factor)) {
      return BadConfig(r.source, "rope_scaling", "gives a non-positive attention factor");
    }
  }
  c.rope_scaling = s;
  return OkStatus();
}

// config.json's layer_types (transformers' per-layer attention kinds) into
// c.sliding_window_layers; false when the config has none.
StatusOr<bool> ParseLayerTypes(const Reader& r, ModelConfig& c) {
  auto types = r.j.find("layer_types");
  if (types == r.j.end() || types->is_null()) return false;
  const int64_t n = c.num_hidden_layers;
  if (!types->is_array() || static_cast<int64_t>(types->size()) != n) {
    return BadConfig(r.source, "layer_types",
                     "must list one attention type per layer (" + std::to_string(n) + ")");
  }
  c.sliding_window_layers.assign(n, false);
  for (int64_t i = 0; i < n; ++i) {
    const json& t = (*types)[i];
    if (t != "full_attention" && t != "sliding_attention") {
      return BadConfig(
          r.source, "layer_types",
          "entries must be \"full_attention\" or \"sliding_attention\", got " + t.dump());
    }
    c.sliding_window_layers[i] = t == "sliding_attention";
  }
  return true;
}

// Qwen2 / Qwen3 (configuration_qwen2.py): with use_sliding_window, the
// layers that config.layer_types marks "sliding_attention" see only the
// last sliding_window positions; without layer_types, the layers from
// max_window_layers on. Without use_sliding_window every layer is full.
Status ParseQwenSlidingWindow(const Reader& r, ModelConfig& c) {
  QD_ASSIGN_OR_RETURN(bool use_sliding, r.Bool("use_sliding_window", false));
  if (!use_sliding) return OkStatus();
  // An explicit null window turns sliding off (transformers' default, 4096,
  // applies only when the key is absent).
  auto w = r.j.find("sliding_window");
  if (w != r.j.end() && w->is_null()) return OkStatus();
  QD_ASSIGN_OR_RETURN(int64_t window, r.Int("sliding_window", int64_t{4096}, 1, int64_t{1} << 40));
  const int64_t n = c.num_hidden_layers;
  c.sliding_window_layers.assign(n, false);
  QD_ASSIGN_OR_RETURN(const bool typed, ParseLayerTypes(r, c));
  if (!typed) {
    QD_ASSIGN_OR_RETURN(int64_t first, r.Int("max_window_layers", int64_t{28}, 0, kMaxLayers));
    for (int64_t i = first; i < n; ++i) c.sliding_window_layers[i] = true;
  }
  c.sliding_window = window;
  return OkStatus();
}

// Mixtral (configuration_mixtral.py: num_local_experts, every layer sparse,
// experts of intermediate_size, weights always renormalised) and
// Qwen2-MoE / Qwen3-MoE (configuration_qwen2_moe.py, configuration_qwen3_moe.py:
// num_experts, moe_intermediate_size, norm_topk_prob, a layer is sparse when
// not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0;
// Qwen2-MoE's shared expert) and OLMoE (configuration_olmoe.py: num_experts
// (alias num_local_experts), every layer sparse, experts of
// intermediate_size, norm_topk_prob).
Status ParseMixtureOfExperts(const Reader& r, ModelConfig& c) {
  const bool mixtral = c.architecture == "MixtralForCausalLM";
  const bool qwen2 = c.architecture == "Qwen2MoeForCausalLM";
  const bool olmoe = c.architecture == "OlmoeForCausalLM";
  if (!mixtral && !qwen2 && !olmoe && c.architecture != "Qwen3MoeForCausalLM") return OkStatus();
  const int64_t n = c.num_hidden_layers;
  c.moe_layers.assign(n, true);
  if (olmoe) {
    const char* key =
        r.Has("num_experts") || !r.Has("num_local_experts") ? "num_experts" : "num_local_experts";
    QD_ASSIGN_OR_RETURN(c.num_experts, r.Int(key, int64_t{64}, 1, kMaxExperts));
    QD_ASSIGN_OR_RETURN(c.num_experts_per_tok,
                        r.Int("num_experts_per_tok", int64_t{8}, 1, kMaxExperts));
    c.moe_intermediate_size = c.intermediate_size;
    QD_ASSIGN_OR_RETURN(c.norm_topk_prob, r.Bool("norm_topk_prob", false));
  } else if (mixtral) {
    QD_ASSIGN_OR_RETURN(c.num_experts, r.Int("num_local_experts", int64_t{8}, 1, kMaxExperts));
    QD_ASSIGN_OR_RETURN(c.num_experts_per_tok,
                        r.Int("num_experts_per_tok", int64_t{2}, 1, kMaxExperts));
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
  } else {
    QD_ASSIGN_OR_RETURN(c.num_experts,
                        r.Int("num_experts", int64_t{qwen2 ? 60 : 128}, 0, kMaxExperts));
    QD_ASSIGN_OR_RETURN(c.num_experts_per_tok,
                        r.Int("num_experts_per_tok", int64_t{qwen2 ? 4 : 8}, 1, kMaxExperts));
    QD_ASSIGN_OR_RETURN(c.moe_intermediate_size,
                        r.Int("moe_intermediate_size", int64_t{qwen2 ? 1408 : 768}));
    QD_ASSIGN_OR_RETURN(c.norm_topk_prob, r.Bool("norm_topk_prob", false));
    if (qwen2) {
      QD_ASSIGN_OR_RETURN(c.shared_expert_intermediate_size,
                          r.Int("shared_expert_intermediate_size", int64_t{5632}, 0));
    }
    QD_ASSIGN_OR_RETURN(int64_t step, r.Int("decoder_sparse_step", int64_t{1}, 1, kMaxLayers));
    for (int64_t i = 0; i < n; ++i) c.moe_layers[i] = c.num_experts > 0 && (i + 1) % step == 0;
    auto only = r.j.find("mlp_only_layers");
    if (only != r.j.end() && !only->is_null()) {
      if (!only->is_array() || only->size() > static_cast<size_t>(kMaxLayers)) {
        return BadConfig(r.source, "mlp_only_layers", "must be a list of layer indices");
      }
      for (const json& v : *only) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n) {
          return BadConfig(
              r.source, "mlp_only_layers",
              "entries must be layer indices in [0, " + std::to_string(n) + "), got " + v.dump());
        }
        c.moe_layers[v.get<int64_t>()] = false;
      }
    }
  }
  if (c.num_experts > 0 && c.num_experts_per_tok > c.num_experts) {
    return BadConfig(r.source, "num_experts_per_tok",
                     "(" + std::to_string(c.num_experts_per_tok) + ") must not exceed the " +
                         std::to_string(c.num_experts) + " experts");
  }
  if (c.num_experts == 0) c.moe_layers.assign(n, false);
  if (c.num_experts * n > kMaxExpertsTimesLayers) {
    const bool local = mixtral || (olmoe && !r.Has("num_experts"));
    return BadConfig(r.source, local ? "num_local_experts" : "num_experts",
                     "(" + std::to_string(c.num_experts) + ") times num_hidden_layers (" +
                         std::to_string(n) + ") must not exceed " +
                         std::to_string(kMaxExpertsTimesLayers));
  }
  return OkStatus();
}

Status ParseLlamaFamily(const Reader& r, ModelConfig& c) {
  QD_ASSIGN_OR_RETURN(c.hidden_size, r.Int("hidden_size", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.intermediate_size, r.Int("intermediate_size", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.num_hidden_layers, r.Int("num_hidden_layers", std::nullopt, 1, kMaxLayers));
  QD_ASSIGN_OR_RETURN(c.num_attention_heads, r.Int("num_attention_heads", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.num_key_value_heads, r.Int("num_key_value_heads", c.num_attention_heads));
  QD_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int("max_position_embeddings", 2048));
  QD_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim", int64_t{0}, 0));
  QD_ASSIGN_OR_RETURN(c.norm_eps, r.Double("rms_norm_eps", 1e-6));
  QD_ASSIGN_OR_RETURN(c.rope_theta, r.Double("rope_theta", 10000.0));
  QD_ASSIGN_OR_RETURN(c.hidden_act, r.String("hidden_act", "silu"));
  QD_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", false));
  const bool qwen_moe =
      c.architecture == "Qwen2MoeForCausalLM" || c.architecture == "Qwen3MoeForCausalLM";
  if (c.architecture == "Qwen2ForCausalLM" || c.architecture == "Qwen3ForCausalLM" || qwen_moe) {
    const bool qwen3 =
        c.architecture == "Qwen3ForCausalLM" || c.architecture == "Qwen3MoeForCausalLM";
    QD_RETURN_IF_ERROR(ParseQwenSlidingWindow(r, c));
    // Qwen2 always has q/k/v biases; Qwen3 (modeling_qwen3.py) has
    // attention_bias on all four projections, and per-head q/k norms.
    c.qkv_bias = true;
    if (qwen3) {
      QD_ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", false));
      c.qkv_bias = c.o_bias = attention_bias;
      c.qk_norm = true;
    }
  } else if (c.architecture == "OlmoeForCausalLM") {
    // OLMoE (modeling_olmoe.py): attention_bias on all four projections;
    // q_norm / k_norm over the whole q and k outputs; head_dim is always
    // hidden_size / num_attention_heads; clip_qkv clamps q, k, v after the
    // norms.
    QD_ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", false));
    c.qkv_bias = c.o_bias = attention_bias;
    c.qk_norm = c.qk_norm_full_width = true;
    c.head_dim = 0;
    QD_ASSIGN_OR_RETURN(c.norm_eps, r.Double("rms_norm_eps", 1e-5));
    auto clip = r.j.find("clip_qkv");
    if (clip != r.j.end() && !clip->is_null()) {
      QD_ASSIGN_OR_RETURN(c.clip_qkv, r.Double("clip_qkv", 0));
      if (!(c.clip_qkv > 0) || !std::isfinite(c.clip_qkv)) {
        return BadConfig(r.source, "clip_qkv", "must be a positive number or null");
      }
    }
  } else if (c.family == ArchitectureFamily::kLlama) {
    QD_ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", false));
    c.qkv_bias = c.o_bias = attention_bias;
    QD_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
  }
  // Phi-3 (Mistral's attention) slides every layer when the window is set.
  const bool slides_all = c.architecture == "MistralForCausalLM" ||
                          c.architecture == "MixtralForCausalLM" ||
                          c.family == ArchitectureFamily::kPhi3;
  if (slides_all && r.Has("sliding_window")) {
    QD_ASSIGN_OR_RETURN(int64_t w, r.Int("sliding_window", std::nullopt, 1, int64_t{1} << 40));
    c.sliding_window = w;
  }
  return ParseMixtureOfExperts(r, c);
}

// Gemma 2 / Gemma 3 text (transformers' configuration_gemma2.py and
// configuration_gemma3.py): the Llama keys with Gemma's defaults, the
// soft-capping and attention scale, and which layers slide (layer_types,
// else Gemma 2's every other layer from layer 0, Gemma 3's all but every
// sliding_window_pattern-th).
Status ParseGemma(const Reader& r, ModelConfig& c) {
  const bool gemma3 = c.architecture == "Gemma3ForCausalLM";
  QD_RETURN_IF_ERROR(ParseLlamaFamily(r, c));
  QD_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim", int64_t{256}));
  QD_ASSIGN_OR_RETURN(c.num_key_value_heads, r.Int("num_key_value_heads", int64_t{4}));
  QD_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", true));
  QD_ASSIGN_OR_RETURN(c.rope_theta, r.Double("rope_theta", gemma3 ? 1000000.0 : 10000.0));
  // gemma2's configs carry hidden_activation (and often hidden_act too).
  QD_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "gelu_pytorch_tanh"));
  QD_ASSIGN_OR_RETURN(c.hidden_act, r.String("hidden_activation", act));
  QD_ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", false));
  c.qkv_bias = c.o_bias = attention_bias;
  QD_ASSIGN_OR_RETURN(c.query_pre_attn_scalar, r.Double("query_pre_attn_scalar", 256.0));
  if (!(c.query_pre_attn_scalar > 0) || !std::isfinite(c.query_pre_attn_scalar)) {
    return BadConfig(r.source, "query_pre_attn_scalar", "must be a positive number");
  }
  // An explicit null turns soft-capping off; absent, Gemma 2 caps at 50 / 30.
  auto capping = [&](const char* key, double fallback) -> StatusOr<double> {
    auto it = r.j.find(key);
    if (it != r.j.end() && it->is_null()) return 0.0;
    QD_ASSIGN_OR_RETURN(double v, r.Double(key, fallback));
    if (v < 0 || !std::isfinite(v)) return BadConfig(r.source, key, "must be positive or null");
    return v;
  };
  QD_ASSIGN_OR_RETURN(c.attn_logit_softcapping,
                      capping("attn_logit_softcapping", gemma3 ? 0.0 : 50.0));
  QD_ASSIGN_OR_RETURN(c.final_logit_softcapping,
                      capping("final_logit_softcapping", gemma3 ? 0.0 : 30.0));
  c.scale_embeddings = true;
  if (gemma3) {
    c.qk_norm = true;
    QD_ASSIGN_OR_RETURN(c.rope_local_base_freq, r.Double("rope_local_base_freq", 10000.0));
    if (!(c.rope_local_base_freq > 0)) {
      return BadConfig(r.source, "rope_local_base_freq", "must be positive");
    }
  }
  auto w = r.j.find("sliding_window");
  if (w != r.j.end() && w->is_null()) return OkStatus();
  QD_ASSIGN_OR_RETURN(int64_t window, r.Int("sliding_window", int64_t{4096}, 1, int64_t{1} << 40));
  const int64_t n = c.num_hidden_layers;
  c.sliding_window_layers.assign(n, false);
  QD_ASSIGN_OR_RETURN(const bool typed, ParseLayerTypes(r, c));
  if (!typed) {
    QD_ASSIGN_OR_RETURN(int64_t pattern,
                        r.Int("sliding_window_pattern", int64_t{gemma3 ? 6 : 2}, 1, kMaxLayers));
    for (int64_t i = 0; i < n; ++i) c.sliding_window_layers[i] = (i + 1) % pattern != 0;
  }
  c.sliding_window = window;
  return OkStatus();
}

Status ParseGpt2(const Reader& r, ModelConfig& c) {
  QD_ASSIGN_OR_RETURN(c.hidden_size, r.Int("n_embd", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.num_hidden_layers, r.Int("n_layer", std::nullopt, 1, kMaxLayers));
  QD_ASSIGN_OR_RETURN(c.num_attention_heads, r.Int("n_head", std::nullopt));
  c.num_key_value_heads = c.num_attention_heads;
  QD_ASSIGN_OR_RETURN(c.intermediate_size, r.Int("n_inner", 4 * c.hidden_size));
  QD_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int("n_positions", 1024));
  QD_ASSIGN_OR_RETURN(c.norm_eps, r.Double("layer_norm_epsilon", 1e-5));
  QD_ASSIGN_OR_RETURN(c.hidden_act, r.String("activation_function", "gelu_new"));
  QD_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", true));
  QD_ASSIGN_OR_RETURN(c.scale_attn_weights, r.Bool("scale_attn_weights", true));
  QD_ASSIGN_OR_RETURN(c.scale_attn_by_inverse_layer_idx,
                      r.Bool("scale_attn_by_inverse_layer_idx", false));
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  return OkStatus();
}

Status ParseOpt(const Reader& r, ModelConfig& c) {
  QD_ASSIGN_OR_RETURN(c.hidden_size, r.Int("hidden_size", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.intermediate_size, r.Int("ffn_dim", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.num_hidden_layers, r.Int("num_hidden_layers", std::nullopt, 1, kMaxLayers));
  QD_ASSIGN_OR_RETURN(c.num_attention_heads, r.Int("num_attention_heads", std::nullopt));
  c.num_key_value_heads = c.num_attention_heads;
  QD_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", std::nullopt));
  QD_ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int("max_position_embeddings", 2048));
  QD_ASSIGN_OR_RETURN(c.word_embed_proj_dim, r.Int("word_embed_proj_dim", c.hidden_size));
  QD_ASSIGN_OR_RETURN(c.do_layer_norm_before, r.Bool("do_layer_norm_before", true));
  QD_ASSIGN_OR_RETURN(bool remove_final, r.Bool("_remove_final_layer_norm", false));
  c.final_layer_norm = c.do_layer_norm_before && !remove_final;
  QD_ASSIGN_OR_RETURN(c.hidden_act, r.String("activation_function", "relu"));
  QD_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", true));
  QD_ASSIGN_OR_RETURN(bool enable_bias, r.Bool("enable_bias", true));
  QD_ASSIGN_OR_RETURN(bool affine, r.Bool("layer_norm_elementwise_affine", true));
  if (!enable_bias || !affine) {
    return UnimplementedError(r.source +
                              ": OPT with enable_bias or layer_norm_elementwise_affine false is "
                              "not supported");
  }
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.norm_eps = 1e-5;  // OPT's LayerNorms use PyTorch's default
  return OkStatus();
}

}  // namespace

const std::vector<std::string>& SupportedArchitectures() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const auto& a : kArchitectures) v->push_back(a.architecture);
    return v;
  }();
  return *names;
}

StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source) {
  StatusOr<json> parsed = ParseBoundedJson(json_text, JsonBounds{json_limits::kModelConfig}, source,
                                           StatusCode::kFailedPrecondition);
  if (!parsed.ok()) return Status(parsed.status()).WithReason("INVALID_MODEL_CONFIG");
  const json j = std::move(parsed).value();
  if (!j.is_object()) {
    return Status(StatusCode::kFailedPrecondition, source + ": not a JSON object",
                  "INVALID_MODEL_CONFIG");
  }
  Reader r{j, source};
  ModelConfig c;
  QD_ASSIGN_OR_RETURN(c.model_type, r.String("model_type", ""));
  auto arch = j.find("architectures");
  if (arch != j.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string()) {
    c.architecture = (*arch)[0].get<std::string>();
  }
  const ArchitectureRow* row = nullptr;
  for (const auto& a : kArchitectures) {
    if (c.architecture.empty() ? c.model_type == a.model_type : c.architecture == a.architecture) {
      row = &a;
    }
  }
  if (row == nullptr) {
    const std::string what = c.architecture.empty() ? "model_type \"" + c.model_type + "\""
                                                    : "architecture \"" + c.architecture + "\"";
    return Status(
        StatusCode::kFailedPrecondition,
        source + ": " + what + " is not supported; supported architectures: " + SupportedList(),
        "UNSUPPORTED_ARCHITECTURE");
  }
  c.architecture = row->architecture;
  c.family = row->family;
  if (c.model_type.empty()) c.model_type = row->model_type;

  switch (c.family) {
    case ArchitectureFamily::kLlama:
    case ArchitectureFamily::kPhi3:
      QD_RETURN_IF_ERROR(ParseLlamaFamily(r, c));
      break;
    case ArchitectureFamily::kGemma:
      QD_RETURN_IF_ERROR(ParseGemma(r, c));
      break;
    case ArchitectureFamily::kGpt2:
      QD_RETURN_IF_ERROR(ParseGpt2(r, c));
      break;
    case ArchitectureFamily::kOpt:
      QD_RETURN_IF_ERROR(ParseOpt(r, c));
      break;
  }
  c.bos_token_id = r.TokenId("bos_token_id");
  c.eos_token_id = r.TokenId("eos_token_id");
  QD_ASSIGN_OR_RETURN(c.torch_dtype, r.String("torch_dtype", ""));

  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0) {
      return BadConfig(source, "num_attention_heads",
                       "(" + std::to_string(c.num_attention_heads) + ") must divide hidden_size (" +
                           std::to_string(c.hidden_size) + ")");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return BadConfig(source, "num_key_value_heads",
                     "(" + std::to_string(c.num_key_value_heads) +
                         ") must divide num_attention_heads (" +
                         std::to_string(c.num_attention_heads) + ")");
  }
  const bool rotary = c.family == ArchitectureFamily::kLlama ||
                      c.family == ArchitectureFamily::kPhi3 ||
                      c.family == ArchitectureFamily::kGemma;
  if (c.head_dim % 2 != 0 && rotary) {
    return BadConfig(source, "head_dim", "must be even for rotary embeddings");
  }
  c.rotary_dim = c.head_dim;
  if (c.family == ArchitectureFamily::kPhi3) {
    // modeling_phi3.py rotates the first int(head_dim * factor) dimensions.
    QD_ASSIGN_OR_RETURN(double partial, r.Double("partial_rotary_factor", 1.0));
    if (!(partial > 0) || partial > 1) {
      return BadConfig(source, "partial_rotary_factor", "must be in (0, 1]");
    }
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
    if (c.rotary_dim % 2 != 0 || c.rotary_dim == 0) {
      return BadConfig(source, "partial_rotary_factor",
                       "must leave an even, non-zero number of rotary dimensions (head_dim " +
                           std::to_string(c.head_dim) + " gives " + std::to_string(c.rotary_dim) +
                           ")");
    }
  }
  if (rotary) QD_RETURN_IF_ERROR(ParseRopeScaling(r, c));
  if (!(c.norm_eps > 0)) return BadConfig(source, "rms_norm_eps", "must be positive");
  if (!(c.rope_theta > 0)) return BadConfig(source, "rope_theta", "must be positive");
  static const char* kActivations[] = {
      "silu", "swish", "gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu"};
  bool act_ok = false;
  for (const char* a : kActivations) act_ok |= c.hidden_act == a;
  if (!act_ok) {
    return UnimplementedError(source + ": activation \"" + c.hidden_act +
                              "\" is not supported (supported: silu, gelu, gelu_new, "
                              "gelu_pytorch_tanh, gelu_fast, relu)");
  }
  return c;
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  std::string file = path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) file = path + "/config.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return NotFoundError(file + ": cannot open");
  // A huge file is never read whole: ParseModelConfig refuses what is past
  // the limit.
  const std::string text = ReadAtMost(in, json_limits::kModelConfig);
  if (in.bad()) return DataLossError(file + ": read failed");
  return ParseModelConfig(text, file);
}

}  // namespace quantd::models

namespace quantd::models {

bool IsMoeLayer(const ModelConfig& c, int64_t layer) {
  return c.num_experts > 0 && layer >= 0 && layer < static_cast<int64_t>(c.moe_layers.size()) &&
         c.moe_layers[layer];
}

int64_t SlidingWindowAt(const ModelConfig& c, int64_t layer) {
  if (!c.sliding_window) return 0;
  if (c.sliding_window_layers.empty()) return *c.sliding_window;
  const bool slides = layer >= 0 && layer < static_cast<int64_t>(c.sliding_window_layers.size()) &&
                      c.sliding_window_layers[layer];
  return slides ? *c.sliding_window : 0;
}

}  // namespace quantd::models

namespace quantd::models {

ModelConfig RopeConfigAt(const ModelConfig& c, int64_t layer) {
  if (c.rope_local_base_freq <= 0 || SlidingWindowAt(c, layer) == 0) return c;
  ModelConfig local = c;
  local.rope_theta = c.rope_local_base_freq;
  local.rope_scaling.reset();
  return local;
}

}  // namespace quantd::models
