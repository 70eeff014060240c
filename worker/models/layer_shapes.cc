#include "worker/models/layer_shapes.h"

namespace quantd::models {
namespace {

LinearLayerInfo Linear(const std::string& name, int64_t out, int64_t in, bool bias, int64_t block,
                       bool transposed = false) {
  LinearLayerInfo l;
  l.name = name;
  l.out_features = out;
  l.in_features = in;
  l.has_bias = bias;
  l.block = block;
  l.transposed_in_checkpoint = transposed;
  return l;
}

NormInfo Norm(const std::string& name, NormKind kind, int64_t dim) {
  return NormInfo{name, kind, dim, kind == NormKind::kLayerNorm};
}

BlockLayout LlamaBlock(const ModelConfig& c, int64_t i) {
  BlockLayout b;
  b.prefix = "model.layers." + std::to_string(i) + ".";
  const std::string a = b.prefix + "self_attn.";
  const std::string m = b.prefix + "mlp.";
  const int64_t d = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  b.linears = {
      Linear(a + "q_proj", q, d, c.qkv_bias, i),
      Linear(a + "k_proj", kv, d, c.qkv_bias, i),
      Linear(a + "v_proj", kv, d, c.qkv_bias, i),
      Linear(a + "o_proj", d, q, c.o_bias, i),
      Linear(m + "gate_proj", c.intermediate_size, d, c.mlp_bias, i),
      Linear(m + "up_proj", c.intermediate_size, d, c.mlp_bias, i),
      Linear(m + "down_proj", d, c.intermediate_size, c.mlp_bias, i),
  };
  b.norms = {Norm(b.prefix + "input_layernorm", NormKind::kRmsNorm, d),
             Norm(b.prefix + "post_attention_layernorm", NormKind::kRmsNorm, d)};
  if (c.qk_norm) {
    // OLMoE's span the whole projection, Qwen3's one head.
    b.norms.push_back(
        Norm(a + "q_norm", NormKind::kRmsNorm, c.qk_norm_full_width ? q : c.head_dim));
    b.norms.push_back(
        Norm(a + "k_norm", NormKind::kRmsNorm, c.qk_norm_full_width ? kv : c.head_dim));
  }
  // v_proj can absorb o_proj's input scale only when every head has its own
  // v head (no GQA): the scale is per attention-output channel; and not
  // through OLMoE's clip_qkv, whose clamp a scale would move.
  b.groups = {
      {{a + "q_proj", a + "k_proj", a + "v_proj"}, b.prefix + "input_layernorm"},
      {{a + "o_proj"}, kv == q && c.clip_qkv == 0 ? a + "v_proj" : ""},
      {{m + "gate_proj", m + "up_proj"}, b.prefix + "post_attention_layernorm"},
      {{m + "down_proj"}, m + "up_proj"},
  };
  if (IsMoeLayer(c, i)) {
    // The sparse MLP replaces the dense one. Everything that reads the
    // post-attention norm's output is one group, the router first (it sees
    // every token), so a scale folded into the norm reaches all of them;
    // the down projections each have their own up projection before them,
    // so none is named.
    const MoeLayout moe = GetMoeLayout(c, i);
    b.linears.resize(4);
    b.groups.resize(2);
    LinearGroup in{{moe.router}, b.prefix + "post_attention_layernorm", true};
    LinearGroup out{{}, "", true};
    b.linears.push_back(Linear(moe.router, c.num_experts, d, false, i));
    auto add_mlp = [&](const MoeLayout::Mlp& mlp, int64_t ffn) {
      b.linears.push_back(Linear(mlp.gate, ffn, d, false, i));
      b.linears.push_back(Linear(mlp.up, ffn, d, false, i));
      b.linears.push_back(Linear(mlp.down, d, ffn, false, i));
      in.linears.push_back(mlp.gate);
      in.linears.push_back(mlp.up);
      out.linears.push_back(mlp.down);
    };
    if (!moe.shared_expert_gate.empty()) {
      b.linears.push_back(Linear(moe.shared_expert_gate, 1, d, false, i));
      in.linears.push_back(moe.shared_expert_gate);
      add_mlp(moe.shared_expert, c.shared_expert_intermediate_size);
    }
    for (const MoeLayout::Mlp& e : moe.experts) add_mlp(e, c.moe_intermediate_size);
    b.groups.push_back(std::move(in));
    b.groups.push_back(std::move(out));
  }
  return b;
}

// Phi-3 (modeling_phi3.py): Llama's block with q|k|v in one qkv_proj and
// gate|up in one gate_up_proj, quantized as the single Linears they are.
BlockLayout Phi3Block(const ModelConfig& c, int64_t i) {
  BlockLayout b;
  b.prefix = "model.layers." + std::to_string(i) + ".";
  const std::string a = b.prefix + "self_attn.";
  const std::string m = b.prefix + "mlp.";
  const int64_t d = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  b.linears = {
      Linear(a + "qkv_proj", q + 2 * kv, d, false, i),
      Linear(a + "o_proj", d, q, false, i),
      Linear(m + "gate_up_proj", 2 * c.intermediate_size, d, false, i),
      Linear(m + "down_proj", d, c.intermediate_size, false, i),
  };
  b.norms = {Norm(b.prefix + "input_layernorm", NormKind::kRmsNorm, d),
             Norm(b.prefix + "post_attention_layernorm", NormKind::kRmsNorm, d)};
  // The fused projections hold more rows than the next Linear has inputs
  // (v is a third of qkv_proj, up half of gate_up_proj), so only the norms
  // absorb input scales.
  b.groups = {
      {{a + "qkv_proj"}, b.prefix + "input_layernorm"},
      {{a + "o_proj"}, ""},
      {{m + "gate_up_proj"}, b.prefix + "post_attention_layernorm"},
      {{m + "down_proj"}, ""},
  };
  return b;
}

// Gemma 2 / 3 (modeling_gemma2.py, modeling_gemma3.py): Llama's linears,
// four (1 + weight) RMSNorms around the attention and the MLP, Gemma 3's
// q/k norms. The post norms sit on the outputs, so the pre norms (and
// up_proj, and v_proj without GQA) absorb input scales as in Llama.
BlockLayout GemmaBlock(const ModelConfig& c, int64_t i) {
  BlockLayout b = LlamaBlock(c, i);
  const NormKind g = NormKind::kGemmaRmsNorm;
  const int64_t d = c.hidden_size;
  b.norms = {Norm(b.prefix + "input_layernorm", g, d),
             Norm(b.prefix + "post_attention_layernorm", g, d),
             Norm(b.prefix + "pre_feedforward_layernorm", g, d),
             Norm(b.prefix + "post_feedforward_layernorm", g, d)};
  if (c.qk_norm) {
    b.norms.push_back(Norm(b.prefix + "self_attn.q_norm", g, c.head_dim));
    b.norms.push_back(Norm(b.prefix + "self_attn.k_norm", g, c.head_dim));
  }
  b.groups[2].prev_op = b.prefix + "pre_feedforward_layernorm";
  return b;
}

BlockLayout Gpt2Block(const ModelConfig& c, int64_t i) {
  BlockLayout b;
  b.prefix = "transformer.h." + std::to_string(i) + ".";
  const int64_t d = c.hidden_size;
  b.linears = {
      Linear(b.prefix + "attn.c_attn", 3 * d, d, true, i, true),
      Linear(b.prefix + "attn.c_proj", d, d, true, i, true),
      Linear(b.prefix + "mlp.c_fc", c.intermediate_size, d, true, i, true),
      Linear(b.prefix + "mlp.c_proj", d, c.intermediate_size, true, i, true),
  };
  b.norms = {Norm(b.prefix + "ln_1", NormKind::kLayerNorm, d),
             Norm(b.prefix + "ln_2", NormKind::kLayerNorm, d)};
  // c_attn is a fused q|k|v projection and GELU is not scale-equivariant, so
  // only the LayerNorms can absorb input scales.
  b.groups = {
      {{b.prefix + "attn.c_attn"}, b.prefix + "ln_1"},
      {{b.prefix + "attn.c_proj"}, ""},
      {{b.prefix + "mlp.c_fc"}, b.prefix + "ln_2"},
      {{b.prefix + "mlp.c_proj"}, ""},
  };
  return b;
}

BlockLayout OptBlock(const ModelConfig& c, int64_t i) {
  BlockLayout b;
  b.prefix = "model.decoder.layers." + std::to_string(i) + ".";
  const std::string a = b.prefix + "self_attn.";
  const int64_t d = c.hidden_size;
  b.linears = {
      Linear(a + "q_proj", d, d, true, i),
      Linear(a + "k_proj", d, d, true, i),
      Linear(a + "v_proj", d, d, true, i),
      Linear(a + "out_proj", d, d, true, i),
      Linear(b.prefix + "fc1", c.intermediate_size, d, true, i),
      Linear(b.prefix + "fc2", d, c.intermediate_size, true, i),
  };
  b.norms = {Norm(b.prefix + "self_attn_layer_norm", NormKind::kLayerNorm, d),
             Norm(b.prefix + "final_layer_norm", NormKind::kLayerNorm, d)};
  // In a post-LN block (do_layer_norm_before false) the norms sit after the
  // residual add, so they do not feed the linears directly. ReLU is
  // positively homogeneous, so fc1 can absorb fc2's input scale.
  const bool pre = c.do_layer_norm_before;
  b.groups = {
      {{a + "q_proj", a + "k_proj", a + "v_proj"}, pre ? b.prefix + "self_attn_layer_norm" : ""},
      {{a + "out_proj"}, a + "v_proj"},
      {{b.prefix + "fc1"}, pre ? b.prefix + "final_layer_norm" : ""},
      {{b.prefix + "fc2"}, c.hidden_act == "relu" ? b.prefix + "fc1" : ""},
  };
  return b;
}

}  // namespace

ModelLayout GetModelLayout(const ModelConfig& c) {
  ModelLayout m;
  const int64_t d = c.hidden_size;
  switch (c.family) {
    case ArchitectureFamily::kLlama:
    case ArchitectureFamily::kPhi3:
    case ArchitectureFamily::kGemma:
      m.token_embedding = {"model.embed_tokens", c.vocab_size, d};
      m.final_norm = Norm(
          "model.norm",
          c.family == ArchitectureFamily::kGemma ? NormKind::kGemmaRmsNorm : NormKind::kRmsNorm, d);
      m.lm_head = Linear("lm_head", c.vocab_size, d, false, -1);
      break;
    case ArchitectureFamily::kGpt2:
      m.token_embedding = {"transformer.wte", c.vocab_size, d};
      m.position_embedding = {"transformer.wpe", c.max_position_embeddings, d};
      m.final_norm = Norm("transformer.ln_f", NormKind::kLayerNorm, d);
      m.lm_head = Linear("lm_head", c.vocab_size, d, false, -1);
      m.canonical_prefix = "transformer.";
      m.alias_prefix = "";
      break;
    case ArchitectureFamily::kOpt: {
      const int64_t p = c.word_embed_proj_dim;
      m.token_embedding = {"model.decoder.embed_tokens", c.vocab_size, p};
      m.position_offset = 2;
      m.position_embedding = {"model.decoder.embed_positions", c.max_position_embeddings + 2, d};
      if (p != d) {
        m.project_in = Linear("model.decoder.project_in", d, p, false, -1);
        m.project_out = Linear("model.decoder.project_out", p, d, false, -1);
      }
      if (c.final_layer_norm) {
        m.final_norm = Norm("model.decoder.final_layer_norm", NormKind::kLayerNorm, d);
      }
      m.lm_head = Linear("lm_head", c.vocab_size, p, false, -1);
      m.canonical_prefix = "model.";
      m.alias_prefix = "";
      break;
    }
  }
  return m;
}

BlockLayout GetBlockLayout(const ModelConfig& c, int64_t block) {
  switch (c.family) {
    case ArchitectureFamily::kGpt2:
      return Gpt2Block(c, block);
    case ArchitectureFamily::kOpt:
      return OptBlock(c, block);
    case ArchitectureFamily::kPhi3:
      return Phi3Block(c, block);
    case ArchitectureFamily::kGemma:
      return GemmaBlock(c, block);
    case ArchitectureFamily::kLlama:
      break;
  }
  return LlamaBlock(c, block);
}

MoeLayout GetMoeLayout(const ModelConfig& c, int64_t block) {
  MoeLayout moe;
  if (!IsMoeLayer(c, block)) return moe;
  const std::string p = "model.layers." + std::to_string(block) + ".";
  if (c.architecture == "MixtralForCausalLM") {
    // modeling_mixtral.py: block_sparse_moe.experts.N.{w1 gate, w3 up, w2 down}.
    moe.router = p + "block_sparse_moe.gate";
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
      moe.experts.push_back({x + "w1", x + "w3", x + "w2"});
    }
    return moe;
  }
  moe.router = p + "mlp.gate";
  if (c.shared_expert_intermediate_size > 0) {
    moe.shared_expert_gate = p + "mlp.shared_expert_gate";
    const std::string x = p + "mlp.shared_expert.";
    moe.shared_expert = {x + "gate_proj", x + "up_proj", x + "down_proj"};
  }
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
    moe.experts.push_back({x + "gate_proj", x + "up_proj", x + "down_proj"});
  }
  return moe;
}

std::vector<LinearLayerInfo> ListLinearLayers(const ModelConfig& c) {
  std::vector<LinearLayerInfo> out;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    for (auto& l : GetBlockLayout(c, i).linears) out.push_back(std::move(l));
  }
  ModelLayout m = GetModelLayout(c);
  if (!m.project_in.name.empty()) out.push_back(m.project_in);
  if (!m.project_out.name.empty()) out.push_back(m.project_out);
  out.push_back(m.lm_head);
  return out;
}

std::vector<EmbeddingInfo> ListEmbeddings(const ModelConfig& c) {
  ModelLayout m = GetModelLayout(c);
  std::vector<EmbeddingInfo> out = {m.token_embedding};
  if (!m.position_embedding.name.empty()) out.push_back(m.position_embedding);
  return out;
}

StatusOr<std::vector<LinearLayerInfo>> ListLinearLayersFromConfigJson(const std::string& json_text,
                                                                      const std::string& source) {
  QD_ASSIGN_OR_RETURN(ModelConfig c, ParseModelConfig(json_text, source));
  return ListLinearLayers(c);
}

}  // namespace quantd::models
