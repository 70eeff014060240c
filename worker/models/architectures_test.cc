// Every architecture against an independent float64 reference forward
// written here, on small random-initialised checkpoints written to disk with
// SafetensorsWriter and loaded through config.json like a real model.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/safetensors/safetensors_writer.h"
#include "worker/io/safetensors/tensor_io.h"
#include "worker/models/registry.h"

namespace quantd::models {
namespace {

using T = at::Tensor;
using Weights = std::map<std::string, T>;  // float64 copies of what was written

std::string NewDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// Writes config.json and model.safetensors (float32); returns the weights as
// float64 after the float32 rounding, which is what the engine sees.
Weights WriteCheckpoint(const std::string& dir, const std::string& config,
                        const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  std::ofstream(dir + "/config.json") << config;
  auto w = io::SafetensorsWriter::Create(dir + "/model.safetensors");
  EXPECT_TRUE(w.ok());
  Weights out;
  for (const auto& [name, shape] : shapes) {
    const bool is_norm_weight =
        name.find("norm") != std::string::npos || name.find("ln_") != std::string::npos;
    T t = at::randn(shape) * 0.3;
    if (is_norm_weight && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
      t = 1 + 0.2 * at::randn(shape);
    }
    EXPECT_TRUE(io::AddTensor(**w, name, t).ok()) << name;
    out[name] = t.to(at::kDouble);
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return out;
}

T Lin(const T& x, const Weights& w, const std::string& name, bool bias) {
  T y = x.matmul(w.at(name + ".weight").t());
  return bias ? y + w.at(name + ".bias") : y;
}

T Rms(const T& x, const T& weight, double eps) {
  return x / (x.pow(2).mean({-1}, true) + eps).sqrt() * weight;
}

T LayerNorm(const T& x, const Weights& w, const std::string& name, double eps) {
  T mu = x.mean({-1}, true);
  T var = (x - mu).pow(2).mean({-1}, true);
  return (x - mu) / (var + eps).sqrt() * w.at(name + ".weight") + w.at(name + ".bias");
}

// x: [T, heads, hd]; rotate each (i, i + hd/2) pair by position * inv[i]
// (and scale it: YaRN's and LongRoPE's attention factor).
T Rope(const T& x, const std::vector<double>& inv, double scale = 1.0) {
  T y = x.clone();
  const int64_t half = x.size(2) / 2;
  for (int64_t p = 0; p < x.size(0); ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double c = std::cos(p * inv[i]) * scale, s = std::sin(p * inv[i]) * scale;
      T a = x.select(0, p).select(1, i), b = x.select(0, p).select(1, i + half);
      y.select(0, p).select(1, i).copy_(a * c - b * s);
      y.select(0, p).select(1, i + half).copy_(b * c + a * s);
    }
  }
  return y;
}

// q: [T, H, hd], k/v: [T, KVH, hd] -> [T, H*hd].
T Attend(const T& q, const T& k, const T& v, double scale, int64_t window = 0) {
  const int64_t t = q.size(0), h = q.size(1), hd = q.size(2), g = h / k.size(1);
  T out = at::zeros({t, h, hd}, at::kDouble);
  for (int64_t head = 0; head < h; ++head) {
    T s = q.select(1, head).matmul(k.select(1, head / g).t()) * scale;  // [T, T]
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        if (j > i || (window > 0 && i - j >= window)) s[i][j] = -INFINITY;
      }
    }
    out.select(1, head).copy_(at::softmax(s, -1).matmul(v.select(1, head / g)));
  }
  return out.reshape({t, h * hd});
}

std::vector<double> InvFreq(int64_t hd, double theta) {
  std::vector<double> inv;
  for (int64_t i = 0; i < hd / 2; ++i) inv.push_back(std::pow(theta, -2.0 * i / hd));
  return inv;
}

struct LlamaRef {
  int64_t d, h, kvh, hd, layers;
  double eps;
  std::vector<double> inv;
  bool qkv_bias;
  int64_t window;
  std::string lm_head;
  // Qwen3 (transformers' models/qwen3/modeling_qwen3.py at commit
  // 000c33fdfde1, Qwen3Attention): q_norm / k_norm, RMSNorms over each
  // head's head_dim values, between the projections and the rotary
  // embedding; attention_bias puts a bias on o_proj too.
  bool qk_norm = false;
  bool o_bias = false;
  double rope_scale = 1.0;
  // Layers that attend through `window` (empty: all of them).
  std::vector<bool> sliding_layers = {};
  // Mixture of experts on the layers `moe_layers` marks: MoeMlp.
  struct Moe {
    std::string router;  // relative to the layer prefix
    std::string expert;  // "<prefix>experts.N." is expert + N + "."
    std::string gate, up, down;
    int64_t experts = 0, top_k = 0;
    bool norm_topk = false;
    bool shared = false;  // Qwen2-MoE's shared expert
    std::vector<bool> layers;
  };
  Moe moe = {};
  // OLMoE (transformers' models/olmoe/modeling_olmoe.py, v4.53,
  // OlmoeAttention): q_norm / k_norm over the whole q and k projections
  // (before the split into heads), then q, k and v clamped to
  // [-clip_qkv, clip_qkv] (0: no clamp).
  bool qk_norm_full = false;
  double clip_qkv = 0;

  T operator()(const Weights& w, const T& ids) const {
    T x = w.at("model.embed_tokens.weight").index_select(0, ids);
    const int64_t t = ids.size(0);
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      T n = Rms(x, w.at(p + "input_layernorm.weight"), eps);
      T q = Lin(n, w, p + "self_attn.q_proj", qkv_bias);
      T k = Lin(n, w, p + "self_attn.k_proj", qkv_bias);
      T v = Lin(n, w, p + "self_attn.v_proj", qkv_bias);
      if (qk_norm && qk_norm_full) {
        q = Rms(q, w.at(p + "self_attn.q_norm.weight"), eps);
        k = Rms(k, w.at(p + "self_attn.k_norm.weight"), eps);
      }
      if (clip_qkv > 0) {
        q = q.clamp(-clip_qkv, clip_qkv);
        k = k.clamp(-clip_qkv, clip_qkv);
        v = v.clamp(-clip_qkv, clip_qkv);
      }
      q = q.reshape({t, h, hd});
      k = k.reshape({t, kvh, hd});
      v = v.reshape({t, kvh, hd});
      if (qk_norm && !qk_norm_full) {
        q = Rms(q, w.at(p + "self_attn.q_norm.weight"), eps);
        k = Rms(k, w.at(p + "self_attn.k_norm.weight"), eps);
      }
      q = Rope(q, inv, rope_scale);
      k = Rope(k, inv, rope_scale);
      const bool slides = sliding_layers.empty() || sliding_layers[l];
      x = x + Lin(Attend(q, k, v, 1 / std::sqrt(double(hd)), slides ? window : 0), w,
                  p + "self_attn.o_proj", o_bias);
      n = Rms(x, w.at(p + "post_attention_layernorm.weight"), eps);
      if (moe.experts > 0 && moe.layers[l]) {
        x = x + MoeMlp(w, p, n);
      } else {
        x = x + SwiGlu(w, p + "mlp.", "gate_proj", "up_proj", "down_proj", n);
      }
    }
    return Rms(x, w.at("model.norm.weight"), eps).matmul(w.at(lm_head).t());
  }

  static T SwiGlu(const Weights& w, const std::string& p, const std::string& gate,
                  const std::string& up, const std::string& down, const T& n) {
    T g = Lin(n, w, p + gate, false);
    return Lin(g / (1 + (-g).exp()) * Lin(n, w, p + up, false), w, p + down, false);
  }

  // Token by token, as the sum over its top-k experts of weight x expert(x)
  // (the weights a softmax over all router logits, renormalised over the
  // chosen ones when norm_topk).
  T MoeMlp(const Weights& w, const std::string& p, const T& n) const {
    T out = at::zeros_like(n);
    T probs = at::softmax(Lin(n, w, p + moe.router, false), -1);
    for (int64_t tok = 0; tok < n.size(0); ++tok) {
      auto [top, idx] = probs[tok].topk(moe.top_k);
      // A near tie would let float32 rounding pick another expert.
      T sorted = std::get<0>(probs[tok].sort(-1, true));
      EXPECT_GT((sorted[moe.top_k - 1] - sorted[moe.top_k]).item<double>(), 1e-5);
      if (moe.norm_topk) top = top / top.sum();
      for (int64_t j = 0; j < moe.top_k; ++j) {
        const std::string e = p + moe.expert + std::to_string(idx[j].item<int64_t>()) + ".";
        out[tok] += top[j] * SwiGlu(w, e, moe.gate, moe.up, moe.down, n[tok]);
      }
    }
    if (moe.shared) {
      T scale = at::sigmoid(Lin(n, w, p + "mlp.shared_expert_gate", false));
      out =
          out + scale * SwiGlu(w, p + "mlp.shared_expert.", "gate_proj", "up_proj", "down_proj", n);
    }
    return out;
  }
};

std::vector<std::pair<std::string, std::vector<int64_t>>> LlamaShapes(const LlamaRef& r,
                                                                      int64_t vocab, int64_t ffn,
                                                                      bool untied) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {"model.embed_tokens.weight", {vocab, r.d}}, {"model.norm.weight", {r.d}}};
  if (untied) s.push_back({"lm_head.weight", {vocab, r.d}});
  for (int64_t l = 0; l < r.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s.push_back({p + "input_layernorm.weight", {r.d}});
    s.push_back({p + "post_attention_layernorm.weight", {r.d}});
    s.push_back({p + "self_attn.q_proj.weight", {r.h * r.hd, r.d}});
    s.push_back({p + "self_attn.k_proj.weight", {r.kvh * r.hd, r.d}});
    s.push_back({p + "self_attn.v_proj.weight", {r.kvh * r.hd, r.d}});
    if (r.qkv_bias) {
      s.push_back({p + "self_attn.q_proj.bias", {r.h * r.hd}});
      s.push_back({p + "self_attn.k_proj.bias", {r.kvh * r.hd}});
      s.push_back({p + "self_attn.v_proj.bias", {r.kvh * r.hd}});
    }
    s.push_back({p + "self_attn.o_proj.weight", {r.d, r.h * r.hd}});
    if (r.o_bias) s.push_back({p + "self_attn.o_proj.bias", {r.d}});
    if (r.qk_norm) {
      s.push_back({p + "self_attn.q_norm.weight", {r.qk_norm_full ? r.h * r.hd : r.hd}});
      s.push_back({p + "self_attn.k_norm.weight", {r.qk_norm_full ? r.kvh * r.hd : r.hd}});
    }
    if (r.moe.experts > 0 && r.moe.layers[l]) continue;
    s.push_back({p + "mlp.gate_proj.weight", {ffn, r.d}});
    s.push_back({p + "mlp.up_proj.weight", {ffn, r.d}});
    s.push_back({p + "mlp.down_proj.weight", {r.d, ffn}});
  }
  return s;
}

// LlamaShapes plus the sparse layers' router and experts of `moe_ffn`
// (and a shared expert of `shared_ffn`).
std::vector<std::pair<std::string, std::vector<int64_t>>> MoeShapes(const LlamaRef& r,
                                                                    int64_t vocab, int64_t ffn,
                                                                    int64_t moe_ffn,
                                                                    int64_t shared_ffn = 0) {
  auto s = LlamaShapes(r, vocab, ffn, true);
  for (int64_t l = 0; l < r.layers; ++l) {
    if (!r.moe.layers[l]) continue;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s.push_back({p + r.moe.router + ".weight", {r.moe.experts, r.d}});
    auto mlp = [&](const std::string& e, const std::string& gate, const std::string& up,
                   const std::string& down, int64_t f) {
      s.push_back({e + gate + ".weight", {f, r.d}});
      s.push_back({e + up + ".weight", {f, r.d}});
      s.push_back({e + down + ".weight", {r.d, f}});
    };
    for (int64_t e = 0; e < r.moe.experts; ++e) {
      mlp(p + r.moe.expert + std::to_string(e) + ".", r.moe.gate, r.moe.up, r.moe.down, moe_ffn);
    }
    if (r.moe.shared) {
      s.push_back({p + "mlp.shared_expert_gate.weight", {1, r.d}});
      mlp(p + "mlp.shared_expert.", "gate_proj", "up_proj", "down_proj", shared_ffn);
    }
  }
  return s;
}

// Runs the engine on `ids` ([B, T]) and compares every sample with `ref`.
template <typename Ref>
void ExpectMatches(const std::string& dir, const Ref& ref, const Weights& w, const T& ids,
                   const std::string& architecture) {
  auto model = OpenCausalLM(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().architecture, architecture);
  auto logits = model->get()->Forward(ids);
  ASSERT_TRUE(logits.ok()) << logits.status();
  for (int64_t b = 0; b < ids.size(0); ++b) {
    T want = ref(w, ids[b]);
    T got = (*logits)[b].to(at::kDouble);
    ASSERT_EQ(got.sizes(), want.sizes());
    const double err = (got - want).abs().max().item<double>();
    const double scale = want.abs().max().item<double>();
    EXPECT_LT(err, 1e-4 * std::max(1.0, scale)) << architecture << " sample " << b;
  }
}

TEST(ArchitecturesTest, Qwen2WithQkvBiasGqaAndUntiedHead) {
  at::manual_seed(11);
  const std::string dir = NewDir("qwen2");
  LlamaRef ref{32, 4, 2, 8, 2, 1e-6, InvFreq(8, 1e6), true, 0, "lm_head.weight"};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "use_sliding_window": false, "sliding_window": 4})",
                                    LlamaShapes(ref, 50, 48, true));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 9}, at::kLong), "Qwen2ForCausalLM");
}

TEST(ArchitecturesTest, Qwen3QkNormAttentionBiasAndExplicitHeadDim) {
  at::manual_seed(14);
  const std::string dir = NewDir("qwen3");
  // head_dim 16 x 4 heads != hidden 32 (as Qwen3-0.6B: 128 x 16 != 1024),
  // GQA, attention_bias on all four projections.
  LlamaRef ref{32, 4, 2, 16, 2, 1e-6, InvFreq(16, 1e6), true, 0, "lm_head.weight", true, true};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "attention_bias": true, "use_sliding_window": false, "sliding_window": null,
    "max_window_layers": 2, "layer_types": ["full_attention", "full_attention"]})",
                                    LlamaShapes(ref, 50, 48, true));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 9}, at::kLong), "Qwen3ForCausalLM");
}

// Mixtral (transformers' models/mixtral/modeling_mixtral.py, v4.51,
// MixtralSparseMoeBlock): every layer sparse, experts' w1 / w3 / w2, top-2
// weights renormalised, Mistral's sliding window.
TEST(ArchitecturesTest, MixtralTopTwoOfFourExpertsWithSlidingWindow) {
  at::manual_seed(21);
  const std::string dir = NewDir("mixtral");
  LlamaRef ref{32, 4, 2, 8, 2, 1e-5, InvFreq(8, 1e6), false, 5, "lm_head.weight"};
  ref.moe = {"block_sparse_moe.gate",
             "block_sparse_moe.experts.",
             "w1",
             "w3",
             "w2",
             4,
             2,
             true,
             false,
             {true, true}};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["MixtralForCausalLM"],
    "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": 5,
    "num_local_experts": 4, "num_experts_per_tok": 2})",
                                    MoeShapes(ref, 50, 24, 24));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 11}, at::kLong), "MixtralForCausalLM");
}

// Qwen2-MoE (models/qwen2_moe/modeling_qwen2_moe.py, v4.51): q/k/v biases,
// top-2 of 4 without renormalising, the shared expert scaled by
// sigmoid(shared_expert_gate), layer 0 dense through mlp_only_layers.
TEST(ArchitecturesTest, Qwen2MoeSharedExpertAndDenseLayer) {
  at::manual_seed(22);
  const std::string dir = NewDir("qwen2_moe");
  LlamaRef ref{32, 4, 2, 8, 3, 1e-6, InvFreq(8, 1e6), true, 0, "lm_head.weight"};
  ref.moe = {"mlp.gate", "mlp.experts.", "gate_proj", "up_proj",          "down_proj", 4,
             2,          false,          true,        {false, true, true}};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Qwen2MoeForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 20, "norm_topk_prob": false,
    "decoder_sparse_step": 1, "mlp_only_layers": [0], "use_sliding_window": false})",
                                    MoeShapes(ref, 50, 40, 16, 20));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 9}, at::kLong), "Qwen2MoeForCausalLM");
}

// Qwen3-MoE (models/qwen3_moe/modeling_qwen3_moe.py, v4.51): Qwen3's q/k
// norms, top-3 of 8 renormalised, every second layer sparse
// (decoder_sparse_step 2).
TEST(ArchitecturesTest, Qwen3MoeQkNormsRenormalisedTopThreeEverySecondLayer) {
  at::manual_seed(23);
  const std::string dir = NewDir("qwen3_moe");
  LlamaRef ref{32, 4, 2, 16, 2, 1e-6, InvFreq(16, 1e6), false, 0, "lm_head.weight", true};
  ref.moe = {"mlp.gate", "mlp.experts.", "gate_proj", "up_proj",    "down_proj", 8,
             3,          true,           false,       {false, true}};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2, "head_dim": 16,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "num_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 12,
    "norm_topk_prob": true, "decoder_sparse_step": 2, "use_sliding_window": false})",
                                    MoeShapes(ref, 50, 40, 12));
  ExpectMatches(dir, ref, w, at::randint(50, {3, 10}, at::kLong), "Qwen3MoeForCausalLM");
}

// OLMoE (models/olmoe/modeling_olmoe.py, v4.53): q/k norms over the whole
// projections, every layer sparse with experts of intermediate_size, top-2
// of 4 not renormalised (norm_topk_prob's default), rms_norm_eps's default
// 1e-5, GQA.
TEST(ArchitecturesTest, OlmoeFullWidthQkNormsTopTwoOfFour) {
  at::manual_seed(24);
  const std::string dir = NewDir("olmoe");
  LlamaRef ref{32, 4, 2, 8, 2, 1e-5, InvFreq(8, 1e4), false, 0, "lm_head.weight", true};
  ref.qk_norm_full = true;
  ref.moe = {"mlp.gate", "mlp.experts.", "gate_proj", "up_proj",   "down_proj", 4,
             2,          false,          false,       {true, true}};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["OlmoeForCausalLM"],
    "model_type": "olmoe", "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "attention_bias": false,
    "clip_qkv": null, "num_experts": 4, "num_experts_per_tok": 2})",
                                    MoeShapes(ref, 50, 24, 24));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 10}, at::kLong), "OlmoeForCausalLM");
}

// OLMoE with clip_qkv (q and k clamped after their norms, v after its
// projection), q/k/v/o biases, top-3 of 6 renormalised (norm_topk_prob).
TEST(ArchitecturesTest, OlmoeClipQkvBiasesRenormalisedTopThree) {
  at::manual_seed(25);
  const std::string dir = NewDir("olmoe_clip");
  LlamaRef ref{32, 4, 4, 8, 2, 1e-6, InvFreq(8, 5e5), true, 0, "lm_head.weight", true, true};
  ref.qk_norm_full = true;
  ref.clip_qkv = 1.25;
  ref.moe = {"mlp.gate", "mlp.experts.", "gate_proj", "up_proj",   "down_proj", 6,
             3,          true,           false,       {true, true}};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["OlmoeForCausalLM"],
    "model_type": "olmoe", "hidden_size": 32, "intermediate_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 50, "rms_norm_eps": 1e-6,
    "rope_theta": 500000.0, "tie_word_embeddings": false, "attention_bias": true,
    "clip_qkv": 1.25, "num_experts": 6, "num_experts_per_tok": 3, "norm_topk_prob": true})",
                                    MoeShapes(ref, 50, 16, 16));
  // The clamp bites: a share of layer 0's v sits beyond the bound.
  const T n =
      Rms(w.at("model.embed_tokens.weight"), w.at("model.layers.0.input_layernorm.weight"), 1e-6);
  const T v = Lin(n, w, "model.layers.0.self_attn.v_proj", true);
  EXPECT_GT((v.abs() > 1.25).to(at::kDouble).mean().item<double>(), 0.1);
  ExpectMatches(dir, ref, w, at::randint(50, {2, 10}, at::kLong), "OlmoeForCausalLM");
}

TEST(ArchitecturesTest, MistralSlidingWindowAndExplicitHeadDim) {
  at::manual_seed(12);
  const std::string dir = NewDir("mistral");
  // head_dim 16 x 4 heads != hidden 32; one kv head; window 4 < 11 tokens.
  LlamaRef ref{32, 4, 1, 16, 2, 1e-5, InvFreq(16, 10000.0), false, 4, "lm_head.weight"};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["MistralForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2, "head_dim": 16,
    "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 40,
    "rms_norm_eps": 1e-5, "sliding_window": 4})",
                                    LlamaShapes(ref, 40, 40, true));
  ExpectMatches(dir, ref, w, at::randint(40, {2, 11}, at::kLong), "MistralForCausalLM");
}

TEST(ArchitecturesTest, Llama3RopeScaling) {
  at::manual_seed(13);
  const std::string dir = NewDir("llama3");
  // Published llama3 recipe, written out independently of the engine.
  std::vector<double> inv = InvFreq(16, 500000.0);
  for (double& f : inv) {
    const double wavelen = 2 * M_PI / f, old = 32, lo = 1, hi = 4, factor = 8;
    if (wavelen > old / lo) {
      f /= factor;
    } else if (wavelen >= old / hi) {
      const double s = (old / wavelen - lo) / (hi - lo);
      f = (1 - s) * f / factor + s * f;
    }
  }
  LlamaRef ref{32, 2, 2, 16, 1, 1e-5, inv, false, 0, "model.embed_tokens.weight"};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 1,
    "num_attention_heads": 2, "vocab_size": 40, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "tie_word_embeddings": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}})",
                                    LlamaShapes(ref, 40, 40, false));
  ExpectMatches(dir, ref, w, at::randint(40, {1, 30}, at::kLong), "LlamaForCausalLM");
}

TEST(ArchitecturesTest, Qwen2AndQwen3SlidingWindowLayers) {
  at::manual_seed(15);
  // Qwen2: use_sliding_window with max_window_layers 1: layers 1 and 2 see
  // the last 3 positions, layer 0 all of them.
  const std::string dir = NewDir("qwen2_swa");
  LlamaRef ref{32, 4, 2, 8, 3, 1e-6, InvFreq(8, 1e6), true, 3, "lm_head.weight"};
  ref.sliding_layers = {false, true, true};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "use_sliding_window": true, "sliding_window": 3, "max_window_layers": 1})",
                                    LlamaShapes(ref, 50, 48, true));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 9}, at::kLong), "Qwen2ForCausalLM");

  // Qwen3 naming the layers itself (layer_types wins over max_window_layers).
  const std::string dir3 = NewDir("qwen3_swa");
  LlamaRef ref3{32, 4, 2, 16, 2, 1e-6, InvFreq(16, 1e6), false, 4, "lm_head.weight", true};
  ref3.sliding_layers = {true, false};
  const Weights w3 = WriteCheckpoint(dir3, R"({"architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "use_sliding_window": true, "sliding_window": 4, "max_window_layers": 0,
    "layer_types": ["sliding_attention", "full_attention"]})",
                                     LlamaShapes(ref3, 50, 48, true));
  ExpectMatches(dir3, ref3, w3, at::randint(50, {1, 10}, at::kLong), "Qwen3ForCausalLM");
}

// The rope_scaling types of transformers' modeling_rope_utils.py, each
// written out here from its published definition.
TEST(ArchitecturesTest, YarnRopeScaling) {
  at::manual_seed(16);
  const std::string dir = NewDir("yarn");
  // head_dim 16, theta 1e4, pretrained context 4096, beta 32 / 1: dims 0-2
  // keep their frequency, 6-7 are divided by the factor, 3-5 are blended.
  const double factor = 4, theta = 10000, orig = 4096;
  const auto correction = [&](double rotations) {
    return 16 * std::log(orig / (rotations * 2 * M_PI)) / (2 * std::log(theta));
  };
  const double lo = std::floor(correction(32)), hi = std::ceil(correction(1));
  ASSERT_EQ(lo, 2);
  ASSERT_EQ(hi, 6);
  std::vector<double> inv = InvFreq(16, theta);
  for (size_t i = 0; i < inv.size(); ++i) {
    const double keep = 1 - std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
    inv[i] = keep * inv[i] + (1 - keep) * inv[i] / factor;
  }
  LlamaRef ref{32, 2, 2, 16, 1, 1e-5, inv, false, 0, "lm_head.weight", true};
  ref.rope_scale = 0.1 * std::log(factor) + 1;
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 1, "head_dim": 16,
    "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 40, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "max_position_embeddings": 16384,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}})",
                                    LlamaShapes(ref, 40, 40, true));
  ExpectMatches(dir, ref, w, at::randint(40, {1, 30}, at::kLong), "Qwen3ForCausalLM");
}

TEST(ArchitecturesTest, DynamicNtkAndLongRopePastTheirContexts) {
  at::manual_seed(17);
  // Dynamic NTK over 12 positions with max_position_embeddings 8: the base
  // becomes theta * (factor * 12 / 8 - (factor - 1))^(hd / (hd - 2)).
  const std::string dir = NewDir("dynamic");
  const double base = 10000 * std::pow(2.0 * 12 / 8 - 1, 16.0 / 14);
  LlamaRef ref{32, 2, 2, 16, 1, 1e-5, InvFreq(16, base), false, 0, "lm_head.weight"};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 1,
    "num_attention_heads": 2, "vocab_size": 40, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 8, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})",
                                    LlamaShapes(ref, 40, 40, true));
  ExpectMatches(dir, ref, w, at::randint(40, {1, 12}, at::kLong), "LlamaForCausalLM");

  // LongRoPE (Phi-3's form) over 12 positions, past the original 8: the long
  // factors, and cos / sin scaled by sqrt(1 + ln(64 / 8) / ln 8) = sqrt(2).
  const std::string dir2 = NewDir("longrope");
  const std::vector<double> longs = {1, 1.5, 2, 3, 5, 8, 13, 21};
  std::vector<double> inv = InvFreq(16, 10000);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] /= longs[i];
  LlamaRef ref2{32, 2, 2, 16, 1, 1e-5, inv, false, 0, "lm_head.weight"};
  ref2.rope_scale = std::sqrt(2.0);
  const Weights w2 = WriteCheckpoint(dir2, R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 1,
    "num_attention_heads": 2, "vocab_size": 40, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 64, "original_max_position_embeddings": 8,
    "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1],
                     "long_factor": [1, 1.5, 2, 3, 5, 8, 13, 21]}})",
                                     LlamaShapes(ref2, 40, 40, true));
  ExpectMatches(dir2, ref2, w2, at::randint(40, {1, 12}, at::kLong), "LlamaForCausalLM");
}

// Phi-3 (transformers' models/phi3/modular_phi3.py at 2b6c089d5a0b): q|k|v
// rows of one qkv_proj, rotary over the first `rot` dims of each head,
// gate|up rows of one gate_up_proj, a sliding window on every layer.
struct Phi3Ref {
  int64_t d, h, kvh, hd, rot, layers, ffn, window;
  std::vector<double> inv;  // rot / 2 frequencies
  double rope_scale = 1.0;

  T operator()(const Weights& w, const T& ids) const {
    T x = w.at("model.embed_tokens.weight").index_select(0, ids);
    const int64_t t = ids.size(0);
    const auto rotate = [&](const T& v) {
      return at::cat({Rope(v.narrow(2, 0, rot), inv, rope_scale), v.narrow(2, rot, hd - rot)}, 2);
    };
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      T n = Rms(x, w.at(p + "input_layernorm.weight"), 1e-5);
      T qkv = Lin(n, w, p + "self_attn.qkv_proj", false);
      T q = rotate(qkv.narrow(1, 0, h * hd).reshape({t, h, hd}));
      T k = rotate(qkv.narrow(1, h * hd, kvh * hd).reshape({t, kvh, hd}));
      T v = qkv.narrow(1, (h + kvh) * hd, kvh * hd).reshape({t, kvh, hd});
      x = x +
          Lin(Attend(q, k, v, 1 / std::sqrt(double(hd)), window), w, p + "self_attn.o_proj", false);
      n = Rms(x, w.at(p + "post_attention_layernorm.weight"), 1e-5);
      T gu = Lin(n, w, p + "mlp.gate_up_proj", false);
      T gate = gu.narrow(1, 0, ffn);
      x = x +
          Lin(gate / (1 + (-gate).exp()) * gu.narrow(1, ffn, ffn), w, p + "mlp.down_proj", false);
    }
    return Rms(x, w.at("model.norm.weight"), 1e-5).matmul(w.at("lm_head.weight").t());
  }
};

std::vector<std::pair<std::string, std::vector<int64_t>>> Phi3Shapes(const Phi3Ref& r,
                                                                     int64_t vocab) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {"model.embed_tokens.weight", {vocab, r.d}},
      {"model.norm.weight", {r.d}},
      {"lm_head.weight", {vocab, r.d}}};
  for (int64_t l = 0; l < r.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s.push_back({p + "input_layernorm.weight", {r.d}});
    s.push_back({p + "post_attention_layernorm.weight", {r.d}});
    s.push_back({p + "self_attn.qkv_proj.weight", {(r.h + 2 * r.kvh) * r.hd, r.d}});
    s.push_back({p + "self_attn.o_proj.weight", {r.d, r.h * r.hd}});
    s.push_back({p + "mlp.gate_up_proj.weight", {2 * r.ffn, r.d}});
    s.push_back({p + "mlp.down_proj.weight", {r.d, r.ffn}});
  }
  return s;
}

TEST(ArchitecturesTest, Phi3FusedProjectionsSlidingWindow) {
  at::manual_seed(18);
  // Phi-3-mini's form: full rotary, GQA-free, a window of 5 < 11 tokens.
  const std::string dir = NewDir("phi3");
  Phi3Ref ref{32, 4, 4, 8, 8, 2, 40, 5, InvFreq(8, 10000)};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Phi3ForCausalLM"],
    "model_type": "phi3", "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 50, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
    "sliding_window": 5, "tie_word_embeddings": false, "rope_scaling": null})",
                                    Phi3Shapes(ref, 50));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 11}, at::kLong), "Phi3ForCausalLM");
}

TEST(ArchitecturesTest, Phi4MiniPartialRotaryGqaAndLongRope) {
  at::manual_seed(19);
  // Phi-4-mini's form: partial_rotary_factor 0.75 (12 of 16 dims turn), GQA,
  // LongRoPE under its old name "su"; 12 tokens past the original 8 take
  // the long factors and sqrt(1 + ln(32 / 8) / ln 8) scales cos / sin.
  const std::string dir = NewDir("phi4mini");
  const std::vector<double> longs = {1, 2, 3, 5, 8, 13};
  std::vector<double> inv;
  for (int64_t i = 0; i < 6; ++i) inv.push_back(std::pow(10000.0, -2.0 * i / 12) / longs[i]);
  Phi3Ref ref{32, 4, 2, 16, 12, 1, 24, 0, inv, std::sqrt(1 + std::log(4.0) / std::log(8.0))};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Phi3ForCausalLM"],
    "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 1, "head_dim": 16,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50, "rms_norm_eps": 1e-5,
    "partial_rotary_factor": 0.75, "max_position_embeddings": 32,
    "original_max_position_embeddings": 8,
    "rope_scaling": {"type": "su", "short_factor": [1, 1, 1, 1, 1, 1],
                     "long_factor": [1, 2, 3, 5, 8, 13]}})",
                                    Phi3Shapes(ref, 50));
  ExpectMatches(dir, ref, w, at::randint(50, {1, 12}, at::kLong), "Phi3ForCausalLM");
}

// Gemma 2 / Gemma 3 (transformers' models/gemma2/modular_gemma2.py at
// 213da5a04374 and models/gemma3/modular_gemma3.py): embeddings times
// sqrt(hidden) (rounded to float32), (1 + w) RMSNorms before and after the
// attention and the MLP, scores scaled by query_pre_attn_scalar^-0.5 and
// soft-capped, sliding layers, a tanh-GELU GeGLU, logits soft-capped; Gemma
// 3's q/k norms and its local rope base on sliding layers.
struct GemmaRef {
  int64_t d, h, kvh, hd, layers, ffn, window;
  std::vector<bool> sliding;
  double qpas, attn_cap, final_cap;
  std::vector<double> inv_global, inv_local;
  bool qk_norm = false;

  T operator()(const Weights& w, const T& ids) const {
    const double eps = 1e-6;
    auto norm = [&](const T& x, const std::string& name) {
      return x / (x.pow(2).mean({-1}, true) + eps).sqrt() * (1 + w.at(name + ".weight"));
    };
    const double scale = static_cast<double>(static_cast<float>(std::sqrt(double(d))));
    T x = w.at("model.embed_tokens.weight").index_select(0, ids) * scale;
    const int64_t t = ids.size(0);
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      T n = norm(x, p + "input_layernorm");
      T q = Lin(n, w, p + "self_attn.q_proj", false).reshape({t, h, hd});
      T k = Lin(n, w, p + "self_attn.k_proj", false).reshape({t, kvh, hd});
      if (qk_norm) {
        q = norm(q, p + "self_attn.q_norm");
        k = norm(k, p + "self_attn.k_norm");
      }
      const std::vector<double>& inv = sliding[l] ? inv_local : inv_global;
      q = Rope(q, inv);
      k = Rope(k, inv);
      T v = Lin(n, w, p + "self_attn.v_proj", false).reshape({t, kvh, hd});
      // Attention with soft-capped scores, written out here.
      T out = at::zeros({t, h, hd}, at::kDouble);
      for (int64_t head = 0; head < h; ++head) {
        T sc = q.select(1, head).matmul(k.select(1, head / (h / kvh)).t()) / std::sqrt(qpas);
        if (attn_cap > 0) sc = at::tanh(sc / attn_cap) * attn_cap;
        for (int64_t i = 0; i < t; ++i)
          for (int64_t j = 0; j < t; ++j)
            if (j > i || (sliding[l] && i - j >= window)) sc[i][j] = -INFINITY;
        out.select(1, head).copy_(at::softmax(sc, -1).matmul(v.select(1, head / (h / kvh))));
      }
      T attn = Lin(out.reshape({t, h * hd}), w, p + "self_attn.o_proj", false);
      x = x + norm(attn, p + "post_attention_layernorm");
      n = norm(x, p + "pre_feedforward_layernorm");
      T gate = Lin(n, w, p + "mlp.gate_proj", false);
      gate = 0.5 * gate * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (gate + 0.044715 * gate.pow(3))));
      T mlp = Lin(gate * Lin(n, w, p + "mlp.up_proj", false), w, p + "mlp.down_proj", false);
      x = x + norm(mlp, p + "post_feedforward_layernorm");
    }
    T logits = norm(x, "model.norm").matmul(w.at("model.embed_tokens.weight").t());  // tied
    return final_cap > 0 ? at::tanh(logits / final_cap) * final_cap : logits;
  }
};

std::vector<std::pair<std::string, std::vector<int64_t>>> GemmaShapes(const GemmaRef& r,
                                                                      int64_t vocab) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {"model.embed_tokens.weight", {vocab, r.d}}, {"model.norm.weight", {r.d}}};
  for (int64_t l = 0; l < r.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"input_layernorm", "post_attention_layernorm",
                          "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      s.push_back({p + n + ".weight", {r.d}});
    s.push_back({p + "self_attn.q_proj.weight", {r.h * r.hd, r.d}});
    s.push_back({p + "self_attn.k_proj.weight", {r.kvh * r.hd, r.d}});
    s.push_back({p + "self_attn.v_proj.weight", {r.kvh * r.hd, r.d}});
    s.push_back({p + "self_attn.o_proj.weight", {r.d, r.h * r.hd}});
    if (r.qk_norm) {
      s.push_back({p + "self_attn.q_norm.weight", {r.hd}});
      s.push_back({p + "self_attn.k_norm.weight", {r.hd}});
    }
    s.push_back({p + "mlp.gate_proj.weight", {r.ffn, r.d}});
    s.push_back({p + "mlp.up_proj.weight", {r.ffn, r.d}});
    s.push_back({p + "mlp.down_proj.weight", {r.d, r.ffn}});
  }
  return s;
}

TEST(ArchitecturesTest, Gemma2SoftCappingSandwichNormsAndAlternatingWindows) {
  at::manual_seed(20);
  // Layers 0 and 2 slide (window 4 < 11 tokens), layer 1 is full; caps low
  // enough to bite on random weights; query_pre_attn_scalar != head_dim.
  const std::string dir = NewDir("gemma2");
  GemmaRef ref{32,
               4,
               2,
               16,
               3,
               48,
               4,
               {true, false, true},
               24.0,
               5.0,
               3.0,
               InvFreq(16, 10000),
               InvFreq(16, 10000)};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 50,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_activation": "gelu_pytorch_tanh",
    "query_pre_attn_scalar": 24, "sliding_window": 4, "attn_logit_softcapping": 5.0,
    "final_logit_softcapping": 3.0, "tie_word_embeddings": true})",
                                    GemmaShapes(ref, 50));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 11}, at::kLong), "Gemma2ForCausalLM");
}

TEST(ArchitecturesTest, Gemma3QkNormsLocalRopeBaseAndScaledGlobalRope) {
  at::manual_seed(21);
  // sliding_window_pattern 3: layers 0, 1 slide with the local base 10000;
  // layer 2 is global with theta 1e6 and linear rope scaling 8; no caps.
  const std::string dir = NewDir("gemma3");
  std::vector<double> global = InvFreq(16, 1e6);
  for (double& f : global) f /= 8;
  GemmaRef ref{32, 4, 1, 16, 3, 48, 5, {true, true, false}, 16.0, 0, 0, global, InvFreq(16, 10000)};
  ref.qk_norm = true;
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text", "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
    "vocab_size": 50, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "query_pre_attn_scalar": 16, "sliding_window": 5, "sliding_window_pattern": 3,
    "final_logit_softcapping": null, "attn_logit_softcapping": null,
    "hidden_activation": "gelu_pytorch_tanh"})",
                                    GemmaShapes(ref, 50));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 12}, at::kLong), "Gemma3ForCausalLM");
}

struct OptRef {
  int64_t d, h, layers, proj;
  bool pre;
  std::string prefix;  // "model.decoder." or "decoder."

  T operator()(const Weights& w, const T& ids) const {
    const std::string m = prefix;
    const int64_t t = ids.size(0), hd = d / h;
    T x = w.at(m + "embed_tokens.weight").index_select(0, ids);
    if (proj != d) x = x.matmul(w.at(m + "project_in.weight").t());
    x = x + w.at(m + "embed_positions.weight").narrow(0, 2, t);
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = m + "layers." + std::to_string(l) + ".";
      T n = pre ? LayerNorm(x, w, p + "self_attn_layer_norm", 1e-5) : x;
      // OPT scales q by head_dim^-0.5 after its projection.
      T q = (Lin(n, w, p + "self_attn.q_proj", true) / std::sqrt(double(hd))).reshape({t, h, hd});
      T k = Lin(n, w, p + "self_attn.k_proj", true).reshape({t, h, hd});
      T v = Lin(n, w, p + "self_attn.v_proj", true).reshape({t, h, hd});
      x = x + Lin(Attend(q, k, v, 1.0), w, p + "self_attn.out_proj", true);
      if (!pre) x = LayerNorm(x, w, p + "self_attn_layer_norm", 1e-5);
      n = pre ? LayerNorm(x, w, p + "final_layer_norm", 1e-5) : x;
      x = x + Lin(Lin(n, w, p + "fc1", true).clamp_min(0), w, p + "fc2", true);
      if (!pre) x = LayerNorm(x, w, p + "final_layer_norm", 1e-5);
    }
    if (pre) x = LayerNorm(x, w, m + "final_layer_norm", 1e-5);
    if (proj != d) x = x.matmul(w.at(m + "project_out.weight").t());
    return x.matmul(w.at(m + "embed_tokens.weight").t());  // tied
  }
};

std::vector<std::pair<std::string, std::vector<int64_t>>> OptShapes(const OptRef& r, int64_t vocab,
                                                                    int64_t ffn, int64_t pos) {
  const std::string m = r.prefix;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {m + "embed_tokens.weight", {vocab, r.proj}}, {m + "embed_positions.weight", {pos + 2, r.d}}};
  if (r.pre) {
    s.push_back({m + "final_layer_norm.weight", {r.d}});
    s.push_back({m + "final_layer_norm.bias", {r.d}});
  }
  if (r.proj != r.d) {
    s.push_back({m + "project_in.weight", {r.d, r.proj}});
    s.push_back({m + "project_out.weight", {r.proj, r.d}});
  }
  for (int64_t l = 0; l < r.layers; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      s.push_back({p + "self_attn." + n + ".weight", {r.d, r.d}});
      s.push_back({p + "self_attn." + n + ".bias", {r.d}});
    }
    for (const char* n : {"self_attn_layer_norm", "final_layer_norm"}) {
      s.push_back({p + n + ".weight", {r.d}});
      s.push_back({p + n + ".bias", {r.d}});
    }
    s.push_back({p + "fc1.weight", {ffn, r.d}});
    s.push_back({p + "fc1.bias", {ffn}});
    s.push_back({p + "fc2.weight", {r.d, ffn}});
    s.push_back({p + "fc2.bias", {r.d}});
  }
  return s;
}

TEST(ArchitecturesTest, OptPreLayerNorm) {
  at::manual_seed(21);
  const std::string dir = NewDir("opt");
  OptRef ref{32, 4, 2, 32, true, "model.decoder."};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["OPTForCausalLM"],
    "hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "max_position_embeddings": 16, "vocab_size": 50, "do_layer_norm_before": true,
    "activation_function": "relu", "word_embed_proj_dim": 32})",
                                    OptShapes(ref, 50, 64, 16));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 10}, at::kLong), "OPTForCausalLM");
}

TEST(ArchitecturesTest, OptPostLayerNormWithProjectionsAndUnprefixedNames) {
  at::manual_seed(22);
  const std::string dir = NewDir("opt350m");
  // OPT-350m style, saved from OPTModel (tensor names without "model.").
  OptRef ref{32, 4, 2, 16, false, "decoder."};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["OPTForCausalLM"],
    "hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "max_position_embeddings": 16, "vocab_size": 50, "do_layer_norm_before": false,
    "word_embed_proj_dim": 16})",
                                    OptShapes(ref, 50, 64, 16));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 16}, at::kLong), "OPTForCausalLM");

  auto model = OpenCausalLM(dir);
  ASSERT_TRUE(model.ok());
  auto too_long = (*model)->Forward(at::zeros({1, 17}, at::kLong));
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), ::testing::HasSubstr("16 learned positions"));
}

struct Gpt2Ref {
  int64_t d, h, layers;
  std::string prefix;  // "transformer." or ""
  bool inverse_layer_scale;

  T operator()(const Weights& w, const T& ids) const {
    const std::string m = prefix;
    const int64_t t = ids.size(0), hd = d / h;
    T x = w.at(m + "wte.weight").index_select(0, ids) + w.at(m + "wpe.weight").narrow(0, 0, t);
    auto conv1d = [&](const T& in, const std::string& name) {  // weight is [in, out]
      return in.matmul(w.at(name + ".weight")) + w.at(name + ".bias");
    };
    auto gelu_new = [](const T& a) {
      return 0.5 * a * (1 + at::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a.pow(3))));
    };
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = m + "h." + std::to_string(l) + ".";
      T qkv = conv1d(LayerNorm(x, w, p + "ln_1", 1e-5), p + "attn.c_attn");
      T q = qkv.narrow(1, 0, d).reshape({t, h, hd});
      T k = qkv.narrow(1, d, d).reshape({t, h, hd});
      T v = qkv.narrow(1, 2 * d, d).reshape({t, h, hd});
      double scale = 1 / std::sqrt(double(hd));
      if (inverse_layer_scale) scale /= (l + 1);
      x = x + conv1d(Attend(q, k, v, scale), p + "attn.c_proj");
      x = x + conv1d(gelu_new(conv1d(LayerNorm(x, w, p + "ln_2", 1e-5), p + "mlp.c_fc")),
                     p + "mlp.c_proj");
    }
    return LayerNorm(x, w, m + "ln_f", 1e-5).matmul(w.at(m + "wte.weight").t());
  }
};

std::vector<std::pair<std::string, std::vector<int64_t>>> Gpt2Shapes(const Gpt2Ref& r,
                                                                     int64_t vocab, int64_t pos) {
  const std::string m = r.prefix;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {{m + "wte.weight", {vocab, r.d}},
                                                                 {m + "wpe.weight", {pos, r.d}},
                                                                 {m + "ln_f.weight", {r.d}},
                                                                 {m + "ln_f.bias", {r.d}}};
  for (int64_t l = 0; l < r.layers; ++l) {
    const std::string p = m + "h." + std::to_string(l) + ".";
    for (const char* n : {"ln_1", "ln_2"}) {
      s.push_back({p + n + ".weight", {r.d}});
      s.push_back({p + n + ".bias", {r.d}});
    }
    // Conv1D: [in, out].
    s.push_back({p + "attn.c_attn.weight", {r.d, 3 * r.d}});
    s.push_back({p + "attn.c_attn.bias", {3 * r.d}});
    s.push_back({p + "attn.c_proj.weight", {r.d, r.d}});
    s.push_back({p + "attn.c_proj.bias", {r.d}});
    s.push_back({p + "mlp.c_fc.weight", {r.d, 4 * r.d}});
    s.push_back({p + "mlp.c_fc.bias", {4 * r.d}});
    s.push_back({p + "mlp.c_proj.weight", {4 * r.d, r.d}});
    s.push_back({p + "mlp.c_proj.bias", {r.d}});
  }
  return s;
}

TEST(ArchitecturesTest, Gpt2Conv1DLayoutAndLearnedPositions) {
  at::manual_seed(31);
  const std::string dir = NewDir("gpt2");
  Gpt2Ref ref{32, 4, 2, "transformer.", false};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["GPT2LMHeadModel"],
    "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 16, "vocab_size": 50,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5})",
                                    Gpt2Shapes(ref, 50, 16));
  ExpectMatches(dir, ref, w, at::randint(50, {2, 12}, at::kLong), "GPT2LMHeadModel");

  // The linears are presented as [out, in]: c_attn's weight is the
  // transposed Conv1D weight.
  auto model = OpenCausalLM(dir);
  ASSERT_TRUE(model.ok());
  auto block = (*model)->LoadBlock(1);
  ASSERT_TRUE(block.ok());
  Linear* c_attn = (*block)->FindLinear("transformer.h.1.attn.c_attn");
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->weight().sizes(), (at::IntArrayRef{96, 32}));
  EXPECT_TRUE(c_attn->info().transposed_in_checkpoint);
  EXPECT_TRUE(
      at::equal(c_attn->weight().to(at::kDouble), w.at("transformer.h.1.attn.c_attn.weight").t()));
}

TEST(ArchitecturesTest, Gpt2UnprefixedNamesAndInverseLayerScaling) {
  at::manual_seed(32);
  const std::string dir = NewDir("gpt2-original");
  // The original "gpt2" repository stores "h.0.attn...", "wte.weight".
  Gpt2Ref ref{32, 2, 2, "", true};
  const Weights w = WriteCheckpoint(dir, R"({"architectures": ["GPT2LMHeadModel"],
    "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 16, "vocab_size": 50,
    "scale_attn_by_inverse_layer_idx": true})",
                                    Gpt2Shapes(ref, 50, 16));
  ExpectMatches(dir, ref, w, at::randint(50, {1, 16}, at::kLong), "GPT2LMHeadModel");
}

}  // namespace
}  // namespace quantd::models
