#include "worker/models/random_checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "worker/io/safetensors/safetensors_writer.h"

namespace quantd::models {
namespace {

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;
  float bound;            // uniform in [-bound, bound]; 0 means constant (norms)
  float constant = 1.0f;  // the value of a constant tensor
};

std::vector<TensorPlan> Tensors(const RandomCheckpointOptions& o) {
  const int64_t d = o.hidden_size, f = o.intermediate_size;
  const int64_t hd = o.head_dim > 0 ? o.head_dim : d / o.num_attention_heads;
  const int64_t q = o.num_attention_heads * hd;
  const int64_t kv = o.num_key_value_heads * hd;
  const bool qwen3 = o.architecture == "qwen3" || o.architecture == "qwen3_moe";
  const bool phi3 = o.architecture == "phi3";
  const bool mixtral = o.architecture == "mixtral";
  const bool olmoe = o.architecture == "olmoe";
  const bool moe =
      mixtral || olmoe || o.architecture == "qwen2_moe" || o.architecture == "qwen3_moe";
  // Mixtral's and OLMoE's experts are intermediate_size wide.
  const int64_t ef =
      !mixtral && !olmoe && o.moe_intermediate_size > 0 ? o.moe_intermediate_size : f;
  const bool gemma = o.architecture == "gemma2" || o.architecture == "gemma3";
  // Uniform[-a, a] has standard deviation a / sqrt(3).
  auto bound = [](int64_t in) { return static_cast<float>(std::sqrt(3.0 / in)); };
  std::vector<TensorPlan> t;
  // Gemma multiplies its embeddings by sqrt(hidden) and ties them to the
  // logits: std 1/sqrt(hidden) keeps both O(1). Its norms scale by
  // (1 + weight), so zeros are the identity, as transformers initialises.
  t.push_back({"model.embed_tokens.weight", {o.vocab_size, d}, gemma ? bound(d) : 1.0f});
  const float norm_one = gemma ? 0.0f : 1.0f;
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {d}, 0, norm_one});
    if (phi3) {
      t.push_back({p + "self_attn.qkv_proj.weight", {q + 2 * kv, d}, bound(d)});
    } else {
      t.push_back({p + "self_attn.q_proj.weight", {q, d}, bound(d)});
      t.push_back({p + "self_attn.k_proj.weight", {kv, d}, bound(d)});
      t.push_back({p + "self_attn.v_proj.weight", {kv, d}, bound(d)});
      if (o.architecture == "qwen2_moe") {  // Qwen2's q/k/v biases
        t.push_back({p + "self_attn.q_proj.bias", {q}, bound(d)});
        t.push_back({p + "self_attn.k_proj.bias", {kv}, bound(d)});
        t.push_back({p + "self_attn.v_proj.bias", {kv}, bound(d)});
      }
    }
    t.push_back({p + "self_attn.o_proj.weight", {d, q}, bound(q)});
    if (qwen3 || o.architecture == "gemma3") {
      t.push_back({p + "self_attn.q_norm.weight", {hd}, 0, norm_one});
      t.push_back({p + "self_attn.k_norm.weight", {hd}, 0, norm_one});
    }
    if (olmoe) {  // over the whole q and k outputs
      t.push_back({p + "self_attn.q_norm.weight", {q}, 0, norm_one});
      t.push_back({p + "self_attn.k_norm.weight", {kv}, 0, norm_one});
    }
    t.push_back({p + "post_attention_layernorm.weight", {d}, 0, norm_one});
    if (gemma) {
      t.push_back({p + "pre_feedforward_layernorm.weight", {d}, 0, norm_one});
      t.push_back({p + "post_feedforward_layernorm.weight", {d}, 0, norm_one});
    }
    auto mlp = [&](const std::string& m, const char* gate, const char* up, const char* down,
                   int64_t ffn) {
      t.push_back({m + gate + ".weight", {ffn, d}, bound(d)});
      t.push_back({m + up + ".weight", {ffn, d}, bound(d)});
      t.push_back({m + down + ".weight", {d, ffn}, bound(ffn)});
    };
    if (moe) {
      const std::string m = p + (mixtral ? "block_sparse_moe." : "mlp.");
      t.push_back({m + "gate.weight", {o.num_experts, d}, bound(d)});
      for (int64_t e = 0; e < o.num_experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        if (mixtral) {
          mlp(x, "w1", "w3", "w2", ef);
        } else {
          mlp(x, "gate_proj", "up_proj", "down_proj", ef);
        }
      }
      if (o.architecture == "qwen2_moe") {
        t.push_back({m + "shared_expert_gate.weight", {1, d}, bound(d)});
        mlp(m + "shared_expert.", "gate_proj", "up_proj", "down_proj", f);
      }
      continue;
    }
    if (phi3) {
      t.push_back({p + "mlp.gate_up_proj.weight", {2 * f, d}, bound(d)});
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {f, d}, bound(d)});
      t.push_back({p + "mlp.up_proj.weight", {f, d}, bound(d)});
    }
    t.push_back({p + "mlp.down_proj.weight", {d, f}, bound(f)});
  }
  t.push_back({"model.norm.weight", {d}, 0, norm_one});
  if (!o.tie_word_embeddings) t.push_back({"lm_head.weight", {o.vocab_size, d}, bound(d)});
  return t;
}

uint64_t Numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

// xorshift64*: fast, seeded, and identical everywhere.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
};

// Round-to-nearest-even float -> bf16 / f16 bits.
uint16_t ToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

uint16_t ToF16(float x) {
  // Values here are in [-2, 2]; normals and subnormals only.
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const float a = std::fabs(x);
  if (a < 6.103515625e-05f) {  // f16 subnormal
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t au;
  std::memcpy(&au, &a, 4);
  uint32_t rounded = au + 0xFFF + ((au >> 13) & 1);
  return static_cast<uint16_t>(sign | (((rounded >> 13) - (112u << 10)) & 0x7FFF));
}

// Fills `out` (element size by dtype) with the tensor's values.
void Fill(const TensorPlan& t, io::SafetensorsDtype dtype, Rng& rng, std::vector<char>& out) {
  const uint64_t n = Numel(t.shape);
  const int es = io::SafetensorsDtypeSize(dtype);
  out.resize(n * es);
  for (uint64_t i = 0; i < n; ++i) {
    float v = t.constant;
    if (t.bound != 0) {
      // 24 random bits -> [-1, 1).
      const float unit = static_cast<float>(rng.Next() >> 40) * (2.0f / 16777216.0f) - 1.0f;
      v = unit * t.bound;
    }
    if (dtype == io::SafetensorsDtype::kF32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == io::SafetensorsDtype::kBF16 ? ToBf16(v) : ToF16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
}

}  // namespace

StatusOr<RandomCheckpointInfo> WriteRandomLlamaCheckpoint(const std::string& dir,
                                                          const RandomCheckpointOptions& o) {
  if (o.dtype != io::SafetensorsDtype::kBF16 && o.dtype != io::SafetensorsDtype::kF16 &&
      o.dtype != io::SafetensorsDtype::kF32) {
    return InvalidArgumentError("random checkpoints are written as BF16, F16 or F32");
  }
  if ((o.head_dim == 0 && o.hidden_size % o.num_attention_heads != 0) ||
      o.num_attention_heads % o.num_key_value_heads != 0) {
    return InvalidArgumentError("heads must divide hidden_size and kv heads must divide heads");
  }
  static const char* kArchitectures[] = {"llama",   "qwen3",     "phi3",      "gemma2", "gemma3",
                                         "mixtral", "qwen2_moe", "qwen3_moe", "olmoe"};
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), o.architecture) ==
      std::end(kArchitectures)) {
    return InvalidArgumentError(
        "random checkpoints are llama, qwen3, phi3, gemma2, gemma3, mixtral, qwen2_moe, "
        "qwen3_moe or olmoe, not " +
        o.architecture);
  }
  if (o.architecture == "olmoe" && o.head_dim > 0 &&
      o.head_dim * o.num_attention_heads != o.hidden_size) {
    return InvalidArgumentError("olmoe's head_dim is hidden_size / num_attention_heads");
  }
  if (o.num_experts < 1 || o.num_experts_per_tok < 1 || o.num_experts_per_tok > o.num_experts) {
    return InvalidArgumentError("num_experts_per_tok must be in [1, num_experts]");
  }
  if (!(o.partial_rotary_factor > 0 && o.partial_rotary_factor <= 1) ||
      (o.partial_rotary_factor != 1 && o.architecture != "phi3")) {
    return InvalidArgumentError("partial_rotary_factor is in (0, 1], and only phi3 has one");
  }
  ::mkdir(dir.c_str(), 0755);
  const int es = io::SafetensorsDtypeSize(o.dtype);
  const std::vector<TensorPlan> tensors = Tensors(o);

  // Greedy packing into shards.
  std::vector<std::vector<size_t>> shards(1);
  uint64_t in_shard = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = Numel(tensors[i].shape) * es;
    if (!shards.back().empty() && in_shard + bytes > o.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
  }

  RandomCheckpointInfo info;
  info.shards = static_cast<int>(shards.size());
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  Rng rng{o.seed * 0x9E3779B97F4A7C15ull + 1};
  std::vector<char> buf;
  char file[64];
  for (size_t s = 0; s < shards.size(); ++s) {
    std::snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    io::SafetensorsWriterOptions wo;
    for (size_t i : shards[s]) wo.plan.push_back({tensors[i].name, o.dtype, tensors[i].shape});
    QD_ASSIGN_OR_RETURN(auto writer, io::SafetensorsWriter::Create(dir + "/" + file, wo));
    for (size_t i : shards[s]) {
      Fill(tensors[i], o.dtype, rng, buf);
      QD_RETURN_IF_ERROR(
          writer->Add(tensors[i].name, o.dtype, tensors[i].shape, buf.data(), buf.size()));
      weight_map[tensors[i].name] = file;
      info.total_bytes += buf.size();
    }
    QD_RETURN_IF_ERROR(writer->Finish());
  }

  nlohmann::ordered_json index = {{"metadata", {{"total_size", info.total_bytes}}},
                                  {"weight_map", weight_map}};
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump(2) << "\n";
  const char* dtype_name = o.dtype == io::SafetensorsDtype::kBF16  ? "bfloat16"
                           : o.dtype == io::SafetensorsDtype::kF16 ? "float16"
                                                                   : "float32";
  const bool qwen3 = o.architecture == "qwen3" || o.architecture == "qwen3_moe";
  const char* architecture = o.architecture == "qwen3"       ? "Qwen3ForCausalLM"
                             : o.architecture == "phi3"      ? "Phi3ForCausalLM"
                             : o.architecture == "gemma2"    ? "Gemma2ForCausalLM"
                             : o.architecture == "gemma3"    ? "Gemma3ForCausalLM"
                             : o.architecture == "mixtral"   ? "MixtralForCausalLM"
                             : o.architecture == "qwen2_moe" ? "Qwen2MoeForCausalLM"
                             : o.architecture == "qwen3_moe" ? "Qwen3MoeForCausalLM"
                             : o.architecture == "olmoe"     ? "OlmoeForCausalLM"
                                                             : "LlamaForCausalLM";
  nlohmann::ordered_json config = {
      {"architectures", {architecture}},
      {"model_type", o.architecture},
      {"hidden_size", o.hidden_size},
      {"intermediate_size", o.intermediate_size},
      {"num_hidden_layers", o.num_hidden_layers},
      {"num_attention_heads", o.num_attention_heads},
      {"num_key_value_heads", o.num_key_value_heads},
      {"vocab_size", o.vocab_size},
      {"max_position_embeddings", 4096},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", o.tie_word_embeddings},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", dtype_name},
  };
  if (o.head_dim > 0) config["head_dim"] = o.head_dim;
  if (qwen3) {
    config["attention_bias"] = false;
    config["use_sliding_window"] = false;
  }
  if (o.architecture == "gemma2" || o.architecture == "gemma3") {
    // Gemma's own keys, at Gemma's defaults for these shapes.
    const int64_t hd = o.head_dim > 0 ? o.head_dim : o.hidden_size / o.num_attention_heads;
    config["model_type"] = o.architecture == "gemma3" ? "gemma3_text" : "gemma2";
    config["head_dim"] = hd;
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["hidden_act"] = "gelu_pytorch_tanh";
    config["query_pre_attn_scalar"] = hd;
    config["sliding_window"] = o.sliding_window > 0 ? o.sliding_window : 4096;
    config["rms_norm_eps"] = 1e-6;
    if (o.architecture == "gemma2") {
      config["attn_logit_softcapping"] = 50.0;
      config["final_logit_softcapping"] = 30.0;
    } else {
      config["rope_theta"] = 1000000.0;
      config["rope_local_base_freq"] = 10000.0;
      config["sliding_window_pattern"] = 6;
    }
  }
  if (o.architecture == "mixtral") {
    config["num_local_experts"] = o.num_experts;
    config["num_experts_per_tok"] = o.num_experts_per_tok;
    config["sliding_window"] = nullptr;
  } else if (o.architecture == "qwen2_moe" || o.architecture == "qwen3_moe") {
    config["num_experts"] = o.num_experts;
    config["num_experts_per_tok"] = o.num_experts_per_tok;
    config["moe_intermediate_size"] =
        o.moe_intermediate_size > 0 ? o.moe_intermediate_size : o.intermediate_size;
    config["norm_topk_prob"] = o.architecture == "qwen3_moe";
    config["decoder_sparse_step"] = 1;
    config["mlp_only_layers"] = nlohmann::ordered_json::array();
    config["use_sliding_window"] = false;
    if (o.architecture == "qwen2_moe") {
      config["shared_expert_intermediate_size"] = o.intermediate_size;
    }
  }
  if (o.architecture == "olmoe") {
    config["num_experts"] = o.num_experts;
    config["num_experts_per_tok"] = o.num_experts_per_tok;
    config["norm_topk_prob"] = false;
    config["attention_bias"] = false;
    config["clip_qkv"] = nullptr;
  }
  if (o.architecture == "phi3") {
    config["original_max_position_embeddings"] = 4096;
    config["sliding_window"] = nullptr;
    if (o.partial_rotary_factor != 1) config["partial_rotary_factor"] = o.partial_rotary_factor;
  }
  std::ofstream out(dir + "/config.json");
  out << config.dump(2) << "\n";
  if (!out) return Status(StatusCode::kUnavailable, dir + "/config.json: write failed");
  return info;
}

}  // namespace quantd::models
