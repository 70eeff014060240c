#include "worker/export/gguf/gguf_export.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "worker/common/bounded_json.h"
#include "worker/export/gguf/gguf_writer.h"
#include "worker/io/gguf/hf_mapping.h"
#include "worker/io/gguf/rope_layout.h"

namespace quantd::gguf {
namespace {

using nlohmann::json;

struct ModelShape {
  std::string arch;  // llama, qwen2, qwen3, gpt2
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  bool rope_permute = false;
  int64_t n_expert = 0;  // mixture of experts; 0 for a dense model
};

// The experts of a Mixtral (num_local_experts) or Qwen MoE (num_experts)
// config.json; 0 for a dense one.
int64_t ExpertCount(const json& cfg) {
  for (const char* key : {"num_local_experts", "num_experts"}) {
    auto it = cfg.find(key);
    if (it != cfg.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return 0;
}

StatusOr<int64_t> Int(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || !it->is_number_integer()) {
    return InvalidArgumentError(std::string("config.json: ") + key +
                                " is missing or not an integer");
  }
  return it->get<int64_t>();
}

StatusOr<double> Number(const json& cfg, const char* key, double fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_number())
    return InvalidArgumentError(std::string("config.json: ") + key + " is not a number");
  return it->get<double>();
}

// llama.cpp's rope_freqs factors for rope_scaling type llama3.
std::vector<float> Llama3RopeFactors(const json& s, double theta, int64_t head_dim) {
  const double factor = s.value("factor", 8.0);
  const double low = s.value("low_freq_factor", 1.0);
  const double high = s.value("high_freq_factor", 4.0);
  const double old_ctx = s.value("original_max_position_embeddings", 8192);
  const double low_wavelen = old_ctx / low;
  const double high_wavelen = old_ctx / high;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// The llama.cpp architecture of a config.json and how its tensors move.
StatusOr<ModelShape> ArchitectureOf(const json& cfg) {
  std::string hf_arch;
  if (cfg.contains("architectures") && cfg["architectures"].is_array() &&
      !cfg["architectures"].empty() && cfg["architectures"][0].is_string()) {
    hf_arch = cfg["architectures"][0].get<std::string>();
  }
  ModelShape shape;
  if (hf_arch == "LlamaForCausalLM" || hf_arch == "MistralForCausalLM" ||
      hf_arch == "MixtralForCausalLM") {
    shape.arch = "llama";
    shape.rope_permute = true;
  } else if (hf_arch == "Qwen2ForCausalLM") {
    shape.arch = "qwen2";
  } else if (hf_arch == "Qwen3ForCausalLM") {
    shape.arch = "qwen3";
  } else if (hf_arch == "Qwen2MoeForCausalLM") {
    shape.arch = "qwen2moe";
  } else if (hf_arch == "Qwen3MoeForCausalLM") {
    shape.arch = "qwen3moe";
  } else if (hf_arch == "OlmoeForCausalLM") {
    shape.arch = "olmoe";  // rotate-half rows, as llama.cpp's converter keeps them
  } else if (hf_arch == "Phi3ForCausalLM") {
    shape.arch = "phi3";
  } else if (hf_arch == "Gemma2ForCausalLM") {
    shape.arch = "gemma2";
  } else if (hf_arch == "Gemma3ForCausalLM") {
    shape.arch = "gemma3";
  } else if (hf_arch == "GPT2LMHeadModel") {
    shape.arch = "gpt2";
  } else {
    return UnimplementedError("GGUF export of architecture '" + hf_arch +
                              "' is not supported (supported: LlamaForCausalLM, "
                              "MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, "
                              "Qwen3ForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, "
                              "OlmoeForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, "
                              "Gemma3ForCausalLM, GPT2LMHeadModel)");
  }
  shape.n_expert = ExpertCount(cfg);
  return shape;
}

// Which layers of a Gemma config.json slide, as transformers' Gemma2Config /
// Gemma3TextConfig derive them: layer_types, else every second layer
// (Gemma 2) or all but every sliding_window_pattern-th (Gemma 3, default 6);
// none without a sliding_window. The llama.cpp period of that, or nullopt.
StatusOr<std::optional<int64_t>> GemmaSlidingPeriod(const json& cfg, int64_t layers) {
  std::vector<bool> sliding(static_cast<size_t>(std::max<int64_t>(layers, 0)), false);
  auto window = cfg.find("sliding_window");
  if (window != cfg.end() && window->is_number() && window->get<double>() > 0) {
    auto types = cfg.find("layer_types");
    const bool gemma2 = cfg.value("model_type", "") == "gemma2";
    int64_t pattern = gemma2 ? 2 : 6;
    if (auto p = cfg.find("sliding_window_pattern"); p != cfg.end() && p->is_number_integer())
      pattern = p->get<int64_t>();
    for (int64_t il = 0; il < layers; ++il) {
      if (types != cfg.end() && types->is_array() &&
          static_cast<int64_t>(types->size()) == layers) {
        sliding[il] = (*types)[il] == "sliding_attention";
      } else {
        sliding[il] = pattern > 0 && (il + 1) % pattern != 0;
      }
    }
  }
  return LlamaCppSlidingPeriod(sliding);
}

// Gemma's keys of llama.cpp (src/models/gemma2.cpp, gemma3.cpp): soft-caps,
// the sliding window and its layer period, Gemma 3's local rope base.
// CheckArchitectureSupport refuses what these cannot say.
Status AddGemmaMetadata(const json& cfg, const std::string& a, GgufWriter* w) {
  const bool gemma2 = a == "gemma2";
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = cfg.find(key);
    if (it == cfg.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  auto f32 = [&](const std::string& key, double v) {
    w->Set(a + "." + key, GgufValue::Float32(static_cast<float>(v)));
  };
  if (auto cap = number("attn_logit_softcapping"); cap && gemma2)
    f32("attn_logit_softcapping", *cap);
  if (auto cap = number("final_logit_softcapping")) f32("final_logit_softcapping", *cap);
  QD_ASSIGN_OR_RETURN(int64_t layers, Int(cfg, "num_hidden_layers"));
  QD_ASSIGN_OR_RETURN(std::optional<int64_t> period, GemmaSlidingPeriod(cfg, layers));
  if (auto window = number("sliding_window"); window && *window > 0 && period) {
    w->Set(a + ".attention.sliding_window", GgufValue::Uint32(static_cast<uint32_t>(*window)));
    w->Set(a + ".attention.sliding_window_pattern",
           GgufValue::Uint32(static_cast<uint32_t>(*period)));
  }
  if (!gemma2) f32("rope.freq_base_swa", number("rope_local_base_freq").value_or(10000.0));
  return OkStatus();
}

StatusOr<ModelShape> AddModelMetadata(const json& cfg, GgufWriter* w,
                                      const GgufExportOptions& options) {
  QD_ASSIGN_OR_RETURN(ModelShape shape, ArchitectureOf(cfg));
  const std::string a = shape.arch;
  w->Set("general.architecture", GgufValue::String(a));
  w->Set("general.name", GgufValue::String(options.model_name));
  // llama.cpp's llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2,
  // MOSTLY_Q4_1 3, MOSTLY_Q8_0 7, MOSTLY_BF16 32, MOSTLY_MXFP4_MOE 38.
  uint32_t file_type = 1;
  switch (options.weight_type) {
    case GgmlType::kF32:
      file_type = 0;
      break;
    case GgmlType::kQ4_0:
      file_type = 2;
      break;
    case GgmlType::kQ4_1:
      file_type = 3;
      break;
    case GgmlType::kQ8_0:
      file_type = 7;
      break;
    case GgmlType::kBF16:
      file_type = 32;
      break;
    case GgmlType::kMXFP4:
      file_type = 38;  // MOSTLY_MXFP4_MOE, llama.cpp's name for MXFP4 files
      break;
    default:
      break;
  }
  if (options.file_type) file_type = *options.file_type;
  w->Set("general.file_type", GgufValue::Uint32(file_type));
  // ggml's GGML_QNT_VERSION, which llama.cpp's converter always writes.
  w->Set("general.quantization_version", GgufValue::Uint32(2));
  auto u32 = [&](const std::string& key, int64_t v) {
    w->Set(a + "." + key, GgufValue::Uint32(static_cast<uint32_t>(v)));
  };
  auto f32 = [&](const std::string& key, double v) {
    w->Set(a + "." + key, GgufValue::Float32(static_cast<float>(v)));
  };
  QD_ASSIGN_OR_RETURN(int64_t vocab, Int(cfg, "vocab_size"));
  if (a == "gpt2") {
    QD_ASSIGN_OR_RETURN(int64_t n_embd, Int(cfg, "n_embd"));
    QD_ASSIGN_OR_RETURN(int64_t n_layer, Int(cfg, "n_layer"));
    QD_ASSIGN_OR_RETURN(shape.n_head, Int(cfg, "n_head"));
    QD_ASSIGN_OR_RETURN(int64_t n_pos, Int(cfg, "n_positions"));
    int64_t n_inner = 4 * n_embd;
    if (cfg.contains("n_inner") && cfg["n_inner"].is_number_integer()) n_inner = cfg["n_inner"];
    QD_ASSIGN_OR_RETURN(double eps, Number(cfg, "layer_norm_epsilon", 1e-5));
    u32("context_length", n_pos);
    u32("embedding_length", n_embd);
    u32("feed_forward_length", n_inner);
    u32("block_count", n_layer);
    u32("attention.head_count", shape.n_head);
    f32("attention.layer_norm_epsilon", eps);
    u32("vocab_size", vocab);
    return shape;
  }
  QD_ASSIGN_OR_RETURN(int64_t hidden, Int(cfg, "hidden_size"));
  QD_ASSIGN_OR_RETURN(int64_t ffn, Int(cfg, "intermediate_size"));
  QD_ASSIGN_OR_RETURN(int64_t layers, Int(cfg, "num_hidden_layers"));
  QD_ASSIGN_OR_RETURN(shape.n_head, Int(cfg, "num_attention_heads"));
  shape.n_head_kv = shape.n_head;
  if (cfg.contains("num_key_value_heads") && cfg["num_key_value_heads"].is_number_integer()) {
    shape.n_head_kv = cfg["num_key_value_heads"];
  }
  shape.head_dim = hidden / shape.n_head;
  // OLMoE's head_dim is always hidden_size / num_attention_heads.
  if (cfg.contains("head_dim") && cfg["head_dim"].is_number_integer() && a != "olmoe")
    shape.head_dim = cfg["head_dim"];
  int64_t ctx = 2048;
  if (cfg.contains("max_position_embeddings") &&
      cfg["max_position_embeddings"].is_number_integer()) {
    ctx = cfg["max_position_embeddings"];
  }
  QD_ASSIGN_OR_RETURN(double eps, Number(cfg, "rms_norm_eps", a == "olmoe" ? 1e-5 : 1e-6));
  QD_ASSIGN_OR_RETURN(double theta, Number(cfg, "rope_theta", 10000.0));
  u32("vocab_size", vocab);
  u32("context_length", ctx);
  u32("embedding_length", hidden);
  u32("block_count", layers);
  u32("feed_forward_length", ffn);
  if (shape.n_expert > 0) {
    // llama.cpp's expert keys (llama-arch.cpp LLM_KV_EXPERT_*): Mixtral's
    // and OLMoE's experts are feed_forward_length wide; Qwen's have their own width and
    // Qwen2-MoE's shared expert another.
    QD_ASSIGN_OR_RETURN(int64_t used, Int(cfg, "num_experts_per_tok"));
    u32("expert_count", shape.n_expert);
    u32("expert_used_count", used);
    if (a == "qwen2moe" || a == "qwen3moe") {
      QD_ASSIGN_OR_RETURN(int64_t expert_ffn, Int(cfg, "moe_intermediate_size"));
      u32("expert_feed_forward_length", expert_ffn);
    }
    if (a == "qwen2moe") {
      QD_ASSIGN_OR_RETURN(int64_t shared_ffn, Int(cfg, "shared_expert_intermediate_size"));
      u32("expert_shared_feed_forward_length", shared_ffn);
    }
  }
  u32("attention.head_count", shape.n_head);
  u32("attention.head_count_kv", shape.n_head_kv);
  int64_t rotary_dim = shape.head_dim;
  if (a == "phi3") {
    // Phi-4-mini's partial rotary: llama.cpp's n_rot.
    QD_ASSIGN_OR_RETURN(double partial, Number(cfg, "partial_rotary_factor", 1.0));
    rotary_dim = static_cast<int64_t>(static_cast<double>(shape.head_dim) * partial);
    if (shape.head_dim * shape.n_head != hidden)
      return InvalidArgumentError(
          "llama.cpp's phi3 needs num_attention_heads * head_dim == hidden_size");
  }
  u32("rope.dimension_count", rotary_dim);
  if (shape.head_dim != hidden / shape.n_head) {
    u32("attention.key_length", shape.head_dim);
    u32("attention.value_length", shape.head_dim);
  }
  f32("attention.layer_norm_rms_epsilon", eps);
  f32("rope.freq_base", theta);
  if (a == "gemma2" || a == "gemma3") QD_RETURN_IF_ERROR(AddGemmaMetadata(cfg, a, w));
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object()) {
    const json& s = cfg["rope_scaling"];
    const std::string type = s.value("rope_type", s.value("type", ""));
    if (type == "linear") {
      w->Set(a + ".rope.scaling.type", GgufValue::String("linear"));
      f32("rope.scaling.factor", s.value("factor", 1.0));
    } else if (type == "llama3") {
      auto factors = Llama3RopeFactors(s, theta, shape.head_dim);
      const int64_t n = static_cast<int64_t>(factors.size());
      QD_RETURN_IF_ERROR(w->AddFloatTensor("rope_freqs.weight", {n}, GgmlType::kF32, factors));
    } else if (type == "yarn") {
      // What llama.cpp reads of YaRN; CheckArchitectureSupport refuses the
      // settings it would compute differently.
      w->Set(a + ".rope.scaling.type", GgufValue::String("yarn"));
      f32("rope.scaling.factor", s.value("factor", 1.0));
      const json& orig = s.contains("original_max_position_embeddings") &&
                                 s["original_max_position_embeddings"].is_number_integer()
                             ? s["original_max_position_embeddings"]
                             : json(ctx);
      u32("rope.scaling.original_context_length", orig.get<int64_t>());
    } else if (!type.empty() && type != "default") {
      return UnimplementedError("GGUF export of rope_scaling type '" + type + "' is not supported");
    }
  }
  return shape;
}

// Buffers HF checkpoints keep that llama.cpp has no tensor for.
bool IsSkippedBuffer(const std::string& name) {
  auto ends_with = [&](const char* s) {
    const std::string suffix(s);
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".rotary_emb.inv_freq") || ends_with(".attn.bias") ||
         ends_with(".attn.masked_bias");
}

// One checkpoint tensor under its llama.cpp name, with its GGUF shape (ne,
// fastest-varying first) and the layout change it takes.
struct MappedTensor {
  std::string hf_name;
  TensorNameMapping mapping;
  std::vector<int64_t> ne;
  std::vector<int64_t> hf_shape;  // the checkpoint's shape
  // A stack of experts (blk.N.ffn_*_exps): every expert's tensor, in
  // expert order (hf_name is expert 0's, hf_shape one expert's).
  std::vector<std::string> expert_names;
};

StatusOr<std::vector<MappedTensor>> MapTensors(const ModelShape& shape,
                                               const io::TensorSource& weights) {
  std::vector<MappedTensor> out;
  std::map<std::string, std::vector<std::string>> stacks;  // GGUF name -> experts
  std::map<std::string, std::set<std::vector<int64_t>>> shapes;
  std::vector<std::string> order;
  for (const std::string& hf_name : weights.Names()) {
    if (IsSkippedBuffer(hf_name)) continue;
    auto mapping = HfToGgufTensorName(shape.arch, hf_name);
    if (!mapping && shape.arch == "gpt2") {
      // GPT2Model checkpoints omit the "transformer." prefix.
      mapping = HfToGgufTensorName(shape.arch, "transformer." + hf_name);
    }
    if (!mapping) {
      return InvalidArgumentError("tensor " + hf_name + " of " + weights.Description() +
                                  " has no llama.cpp name for architecture " + shape.arch);
    }
    const io::TensorInfo* info = weights.Find(hf_name);
    if (!info)
      return NotFoundError("tensor " + hf_name + " vanished from " + weights.Description());
    std::vector<int64_t> torch_shape = info->shape;
    if (mapping->change == LayoutChange::kTranspose && torch_shape.size() == 2) {
      std::swap(torch_shape[0], torch_shape[1]);
    }
    if (mapping->squeeze && torch_shape.size() == 2 && torch_shape[0] == 1) {
      torch_shape.erase(torch_shape.begin());
    }
    if (mapping->expert >= 0) {
      // Gathered below into one stacked tensor per name.
      auto [it, added] = stacks.try_emplace(mapping->name);
      if (added) order.push_back(mapping->name);
      auto& experts = it->second;
      if (experts.size() <= static_cast<size_t>(mapping->expert))
        experts.resize(static_cast<size_t>(mapping->expert) + 1);
      experts[mapping->expert] = hf_name;
      shapes[mapping->name].insert(info->shape);
      continue;
    }
    out.push_back({hf_name, *mapping,
                   std::vector<int64_t>(torch_shape.rbegin(), torch_shape.rend()), info->shape});
  }
  for (const std::string& name : order) {
    const std::vector<std::string>& experts = stacks[name];
    const auto& shape_set = shapes[name];
    for (size_t e = 0; e < experts.size(); ++e) {
      if (experts[e].empty())
        return InvalidArgumentError(weights.Description() + " has no expert " + std::to_string(e) +
                                    " for " + name);
    }
    if (static_cast<int64_t>(experts.size()) != shape.n_expert) {
      return InvalidArgumentError(weights.Description() + " has " + std::to_string(experts.size()) +
                                  " experts for " + name + ", config.json " +
                                  std::to_string(shape.n_expert));
    }
    if (shape_set.size() != 1 || shape_set.begin()->size() != 2) {
      return InvalidArgumentError("the experts of " + name + " in " + weights.Description() +
                                  " are not matrices of one shape");
    }
    const std::vector<int64_t>& one = *shape_set.begin();
    MappedTensor m{experts[0],
                   TensorNameMapping{name, LayoutChange::kNone},
                   {one[1], one[0], static_cast<int64_t>(experts.size())},
                   one,
                   experts};
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<json> ParseConfig(const std::string& config_json) {
  QD_ASSIGN_OR_RETURN(json cfg, ParseBoundedJson(config_json, JsonBounds{json_limits::kModelConfig},
                                                 "config.json"));
  if (!cfg.is_object()) return InvalidArgumentError("config.json is not a JSON object");
  return cfg;
}

}  // namespace

StatusOr<std::map<std::string, RecipeTensorPlan>> PlanGgufRecipe(const std::string& config_json,
                                                                 const io::TensorSource& weights,
                                                                 GgufFileType file_type,
                                                                 bool with_importance) {
  QD_ASSIGN_OR_RETURN(json cfg, ParseConfig(config_json));
  QD_ASSIGN_OR_RETURN(ModelShape shape, ArchitectureOf(cfg));
  RecipeModel model;
  model.arch = shape.arch;
  model.has_imatrix = with_importance;
  const bool gpt2 = shape.arch == "gpt2";
  QD_ASSIGN_OR_RETURN(model.n_layer, Int(cfg, gpt2 ? "n_layer" : "num_hidden_layers"));
  QD_ASSIGN_OR_RETURN(model.n_head, Int(cfg, gpt2 ? "n_head" : "num_attention_heads"));
  model.n_head_kv = model.n_head;
  if (cfg.contains("num_key_value_heads") && cfg["num_key_value_heads"].is_number_integer())
    model.n_head_kv = cfg["num_key_value_heads"];
  QD_ASSIGN_OR_RETURN(std::vector<MappedTensor> mapped, MapTensors(shape, weights));
  model.n_expert = ExpertCount(cfg);
  std::vector<RecipeTensor> tensors;
  for (const MappedTensor& m : mapped)
    tensors.push_back({m.mapping.name, m.ne.empty() ? 0 : m.ne[0], static_cast<int>(m.ne.size())});
  QD_ASSIGN_OR_RETURN(std::vector<RecipeChoice> choices,
                      ChooseRecipeTypes(file_type, model, tensors));
  std::map<std::string, RecipeTensorPlan> plan;
  for (size_t i = 0; i < mapped.size(); ++i) {
    if (!choices[i].type) continue;
    const RecipeTensorPlan p{mapped[i].mapping.name, *choices[i].type, choices[i].wanted,
                             mapped[i].mapping.change == LayoutChange::kTranspose};
    // Every expert of a stack gets the stack's type.
    if (mapped[i].expert_names.empty()) {
      plan[mapped[i].hf_name] = p;
    } else {
      for (const std::string& e : mapped[i].expert_names) plan[e] = p;
    }
  }
  return plan;
}

Status WriteGgufFromHf(const std::string& config_json, const io::TensorSource& weights,
                       const GgufExportOptions& options, const std::string& path) {
  QD_ASSIGN_OR_RETURN(json cfg, ParseConfig(config_json));
  GgufWriter writer(options.alignment);
  QD_ASSIGN_OR_RETURN(ModelShape shape, AddModelMetadata(cfg, &writer, options));
  for (const auto& [key, value] : options.extra_metadata) writer.Set(key, value);

  QD_ASSIGN_OR_RETURN(std::vector<MappedTensor> mapped, MapTensors(shape, weights));
  for (const MappedTensor& m : mapped) {
    const std::string& hf_name = m.hf_name;
    const TensorNameMapping& mapping = m.mapping;
    const std::vector<int64_t>& ne = m.ne;
    GgmlType type = ne.size() >= 2 ? options.weight_type : GgmlType::kF32;
    std::function<Status(const GgufLayoutFn&, std::vector<uint8_t>*)> encode;
    if (options.tensor_encoding) {
      QD_ASSIGN_OR_RETURN(std::optional<GgufTensorEncoding> custom,
                          options.tensor_encoding(hf_name, m.hf_shape));
      if (custom) {
        type = custom->type;
        encode = custom->encode;
      }
    }
    const LayoutChange change = mapping.change;
    const int64_t heads = change == LayoutChange::kRopeQuery ? shape.n_head : shape.n_head_kv;
    const bool permute = shape.rope_permute &&
                         (change == LayoutChange::kRopeQuery || change == LayoutChange::kRopeKey);
    GgufLayoutFn to_gguf = [change, permute, heads](const at::Tensor& hf) -> StatusOr<at::Tensor> {
      try {
        if (permute) return RopeHalfToInterleaved(hf, heads);
        if (change == LayoutChange::kTranspose && hf.dim() == 2) return hf.t().contiguous();
        if (change == LayoutChange::kPlusOne) return (hf.to(at::kFloat) + 1.0f).contiguous();
        return hf.contiguous();
      } catch (const c10::Error& e) {
        return InternalError(e.what_without_backtrace());
      }
    };
    const io::TensorSource* source = &weights;
    // One Hugging Face tensor's bytes, as they go into the GGUF tensor.
    auto one = [source, to_gguf, type](const std::string& name, const decltype(encode)& encode_one,
                                       std::vector<uint8_t>* bytes) -> Status {
      if (encode_one) return encode_one(to_gguf, bytes).Prepend(name + ": ");
      QD_ASSIGN_OR_RETURN(at::Tensor t, source->Load(name, at::kFloat));
      QD_ASSIGN_OR_RETURN(t, to_gguf(t));
      QD_ASSIGN_OR_RETURN(uint64_t size, GgmlRowBytes(type, t.numel()));
      bytes->resize(size);
      return QuantizeRow(type, t.data_ptr<float>(), bytes->data(), t.numel());
    };
    // A stack of experts is each expert's rows in turn, each encoded as the
    // job encodes that expert's weight, all of one type.
    std::vector<decltype(encode)> expert_encodings;
    for (size_t e = 1; e < m.expert_names.size(); ++e) {
      decltype(encode) enc;
      if (options.tensor_encoding) {
        QD_ASSIGN_OR_RETURN(std::optional<GgufTensorEncoding> custom,
                            options.tensor_encoding(m.expert_names[e], m.hf_shape));
        if (custom) {
          if (custom->type != type)
            return InvalidArgumentError("the experts of " + mapping.name +
                                        " are not all of one type (" + m.expert_names[e] + ")");
          enc = custom->encode;
        }
      }
      if (static_cast<bool>(enc) != static_cast<bool>(encode))
        return InvalidArgumentError("the experts of " + mapping.name + " are encoded differently");
      expert_encodings.push_back(std::move(enc));
    }
    Status added =
        writer.AddTensor(mapping.name, ne, type,
                         [one, hf_name, encode, names = m.expert_names,
                          expert_encodings](std::vector<uint8_t>* bytes) -> Status {
                           QD_RETURN_IF_ERROR(one(hf_name, encode, bytes));
                           std::vector<uint8_t> part;
                           for (size_t e = 1; e < names.size(); ++e) {
                             QD_RETURN_IF_ERROR(one(names[e], expert_encodings[e - 1], &part));
                             bytes->insert(bytes->end(), part.begin(), part.end());
                           }
                           return OkStatus();
                         });
    if (!added.ok()) return added.Prepend(hf_name + " as " + GetGgmlTypeTraits(type).name + ": ");
  }
  return writer.Write(path);
}

}  // namespace quantd::gguf
