#include "worker/models/transformer_ops.h"

#include <algorithm>
#include <cmath>

#include "worker/models/matmul_dtype.h"

namespace quantd::models {

namespace {

std::vector<double> DefaultInverseFrequencies(int64_t head_dim, double theta) {
  std::vector<double> inv(head_dim / 2);
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim);
  }
  return inv;
}

// Llama 3.1's published recipe: long wavelengths are slowed by `factor`,
// short ones kept, and the band in between interpolated.
void ApplyLlama3(const RopeScaling& s, std::vector<double>& inv) {
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * M_PI / f;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      f /= s.factor;
      continue;
    }
    const double smooth =
        (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1.0 - smooth) * f / s.factor + smooth * f;
  }
}

// YaRN: dimension i keeps its frequency (extrapolation) below the
// correction range, is divided by `factor` (interpolation) above it, and
// is blended linearly inside it. The range is where a dimension turns
// beta_fast and beta_slow times over the pretrained context.
void ApplyYarn(const RopeScaling& s, int64_t dim, double theta, std::vector<double>& inv) {
  auto correction_dim = [&](double rotations) {
    return dim * std::log(s.original_max_position_embeddings / (rotations * 2 * M_PI)) /
           (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers, to avoid 0 / 0
  for (size_t i = 0; i < inv.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    inv[i] = inv[i] / s.factor * (1.0 - extrapolation) + inv[i] * extrapolation;
  }
}

// config.rotary_dim, or head_dim for a config built without it.
int64_t RotaryDim(const ModelConfig& c) { return c.rotary_dim > 0 ? c.rotary_dim : c.head_dim; }

}  // namespace

std::vector<double> RopeInverseFrequencies(const ModelConfig& c, int64_t seq_len) {
  const int64_t dim = RotaryDim(c);
  if (!c.rope_scaling) return DefaultInverseFrequencies(dim, c.rope_theta);
  const RopeScaling& s = *c.rope_scaling;
  if (s.type == "dynamic") {
    // Dynamic NTK: past max_position_embeddings the base grows so that the
    // lowest frequency still covers the sequence (transformers recomputes
    // it for the longest sequence seen; quantd's windows are all one length).
    const double mpe = static_cast<double>(c.max_position_embeddings);
    const double len = std::max(static_cast<double>(seq_len), mpe);
    const double d = static_cast<double>(dim);
    const double base = c.rope_theta * std::pow(s.factor * len / mpe - (s.factor - 1), d / (d - 2));
    return DefaultInverseFrequencies(dim, base);
  }
  std::vector<double> inv = DefaultInverseFrequencies(dim, c.rope_theta);
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
  } else if (s.type == "llama3") {
    ApplyLlama3(s, inv);
  } else if (s.type == "yarn") {
    ApplyYarn(s, dim, c.rope_theta, inv);
  } else if (s.type == "longrope") {
    const std::vector<double>& divisors =
        seq_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= divisors[i];
  }
  return inv;
}

double RopeAttentionFactor(const ModelConfig& c) {
  return c.rope_scaling ? c.rope_scaling->attention_factor : 1.0;
}

RotaryTables MakeRotaryTables(const ModelConfig& c, int64_t seq_len, at::ScalarType dtype,
                              at::Device device) {
  const std::vector<double> inv = RopeInverseFrequencies(c, seq_len);
  const int64_t half = static_cast<int64_t>(inv.size());
  at::Tensor inv_t = at::empty({half}, at::kDouble);
  std::copy(inv.begin(), inv.end(), inv_t.data_ptr<double>());
  at::Tensor pos = at::arange(seq_len, at::kDouble);
  at::Tensor freqs = at::outer(pos, inv_t);  // [T, half]
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  const double scale = RopeAttentionFactor(c);
  return {(emb.cos() * scale).to(device, dtype), (emb.sin() * scale).to(device, dtype)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& t) {
  const int64_t rotary = t.cos.size(-1);
  if (rotary < x.size(-1)) {
    // Partial rotary (Phi-3's partial_rotary_factor): the leading
    // dimensions turn, the rest pass through.
    return at::cat(
        {ApplyRotary(x.narrow(-1, 0, rotary), t), x.narrow(-1, rotary, x.size(-1) - rotary)}, -1);
  }
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * t.cos + rotated * t.sin;
}

namespace {

// Output rows [q0, q1) of one batch slice, attending to keys [0, q1).
// q: [b, KVH, G, T, hd] (already scaled); k, v: [b, KVH, T, hd]. The G query
// heads sharing a kv head are stacked along the row axis, so every product
// is a plain batched matmul (no broadcast copies of k or v).
at::Tensor AttendRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t q0,
                      int64_t q1, const AttentionOptions& o) {
  const int64_t b = q.size(0), kvh = q.size(1), g = q.size(2), hd = q.size(4);
  const int64_t rows = q1 - q0;
  at::Tensor qs = q.narrow(3, q0, rows).reshape({b, kvh, g * rows, hd});
  at::Tensor ks = k.narrow(2, 0, q1);
  at::Tensor vs = v.narrow(2, 0, q1);
  at::Tensor scores = Matmul(qs, ks.transpose(-1, -2));  // [b, KVH, G*rows, q1]
  const bool low_precision =
      scores.scalar_type() != at::kFloat && scores.scalar_type() != at::kDouble;
  if (low_precision) scores = scores.to(at::kFloat);
  // Gemma 2's soft-capping, on the scaled scores before the mask.
  if (o.softcap > 0) scores = at::tanh(scores / o.softcap) * o.softcap;
  const auto idx = at::TensorOptions().dtype(at::kLong).device(q.device());
  at::Tensor r = at::arange(q0, q1, idx).unsqueeze(1);
  at::Tensor c = at::arange(0, q1, idx).unsqueeze(0);
  at::Tensor masked = c > r;
  if (o.sliding_window > 0) masked = masked.logical_or(r - c >= o.sliding_window);
  at::Tensor bias = at::zeros({rows, q1}, scores.options())
                        .masked_fill_(masked, -std::numeric_limits<double>::infinity());
  scores = scores.view({b, kvh, g, rows, q1}).add_(bias).view({b, kvh, g * rows, q1});
  at::Tensor probs = at::softmax(scores, -1);
  if (low_precision) probs = probs.to(v.scalar_type());
  return Matmul(probs, vs).view({b, kvh, g, rows, hd});
}

}  // namespace

at::Tensor CausalSelfAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& o) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3);
  const int64_t kvh = k.size(1);
  const int64_t g = h / kvh;
  at::Tensor q5 = (q * o.scale).reshape({b, kvh, g, t, hd});
  const int64_t budget = std::max<int64_t>(o.max_score_elements, 1);
  if (b * h * t * t <= budget) {
    return AttendRows(q5, k, v, 0, t, o).reshape({b, h, t, hd});
  }
  // Per sample and per tile of query rows: a tile only reads the keys up to
  // its last row, skipping most of the masked upper triangle. On the CPU
  // each tile stays small enough to be reused from the allocator's free
  // lists and caches (fresh large allocations cost more in page faults than
  // the arithmetic); on a GPU a tile's dozen kernel launches cost more than
  // its arithmetic, so tiles there are as large as the budget allows.
  const int64_t max_rows = q.is_cpu() ? 64 : t;
  const int64_t rows = std::clamp<int64_t>(budget / std::max<int64_t>(1, h * t), 1, max_rows);
  std::vector<at::Tensor> samples;
  samples.reserve(b);
  for (int64_t i = 0; i < b; ++i) {
    at::Tensor qi = q5.narrow(0, i, 1), ki = k.narrow(0, i, 1), vi = v.narrow(0, i, 1);
    std::vector<at::Tensor> tiles;
    for (int64_t r = 0; r < t; r += rows) {
      tiles.push_back(AttendRows(qi, ki, vi, r, std::min(t, r + rows), o));
    }
    samples.push_back(at::cat(tiles, 3));
  }
  return at::cat(samples, 0).reshape({b, h, t, hd});
}

at::Tensor Activation(const at::Tensor& x, const std::string& name) {
  if (name == "silu" || name == "swish") return at::silu(x);
  if (name == "relu") return at::relu(x);
  if (name == "gelu") return at::gelu(x);
  // gelu_new, gelu_pytorch_tanh and gelu_fast are the tanh approximation.
  return at::gelu(x, "tanh");
}

}  // namespace quantd::models
