#include "worker/models/transformer_ops.h"

#include <algorithm>
#include <cmath>

namespace quantd::models {

std::vector<double> RopeInverseFrequencies(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<double> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / c.head_dim);
  }
  if (!c.rope_scaling) return inv;
  const RopeScaling& s = *c.rope_scaling;
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
  } else if (s.type == "llama3") {
    // Long wavelengths are slowed by `factor`, short ones kept, and the band
    // in between interpolated (Llama 3.1's published recipe).
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
  return inv;
}

RotaryTables MakeRotaryTables(const ModelConfig& c, int64_t seq_len, at::ScalarType dtype,
                              at::Device device) {
  const std::vector<double> inv = RopeInverseFrequencies(c);
  const int64_t half = static_cast<int64_t>(inv.size());
  at::Tensor inv_t = at::empty({half}, at::kDouble);
  std::copy(inv.begin(), inv.end(), inv_t.data_ptr<double>());
  at::Tensor pos = at::arange(seq_len, at::kDouble);
  at::Tensor freqs = at::outer(pos, inv_t);  // [T, half]
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(device, dtype), emb.sin().to(device, dtype)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& t) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * t.cos + rotated * t.sin;
}

namespace {

// Scores for query rows [q0, q1) of one batch slice against keys [0, q1).
at::Tensor AttendRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t q0,
                      int64_t q1, const AttentionOptions& o) {
  // q: [b, KVH, G, T, hd]; k, v: [b, KVH, 1, T, hd].
  at::Tensor qs = q.narrow(3, q0, q1 - q0);
  at::Tensor ks = k.narrow(3, 0, q1);
  at::Tensor vs = v.narrow(3, 0, q1);
  at::Tensor scores = at::matmul(qs, ks.transpose(-1, -2));
  if (scores.scalar_type() != at::kFloat && scores.scalar_type() != at::kDouble) {
    scores = scores.to(at::kFloat);
  }
  scores = scores * o.scale;
  at::Tensor rows = at::arange(q0, q1, at::TensorOptions().dtype(at::kLong).device(q.device()));
  at::Tensor cols = at::arange(0, q1, at::TensorOptions().dtype(at::kLong).device(q.device()));
  at::Tensor masked = cols.unsqueeze(0) > rows.unsqueeze(1);  // [rows, cols]
  if (o.sliding_window > 0) {
    masked = masked.logical_or(rows.unsqueeze(1) - cols.unsqueeze(0) >= o.sliding_window);
  }
  scores = scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
  at::Tensor probs = at::softmax(scores, -1).to(v.scalar_type());
  return at::matmul(probs, vs);  // [b, KVH, G, rows, hd]
}

}  // namespace

at::Tensor CausalSelfAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& o) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3);
  const int64_t kvh = k.size(1);
  const int64_t g = h / kvh;
  at::Tensor q5 = q.reshape({b, kvh, g, t, hd});
  at::Tensor k5 = k.unsqueeze(2);
  at::Tensor v5 = v.unsqueeze(2);
  const int64_t budget = std::max<int64_t>(o.max_score_elements, 1);
  if (b * h * t * t <= budget) {
    return AttendRows(q5, k5, v5, 0, t, o).reshape({b, h, t, hd});
  }
  // Per sample and per tile of query rows, so each score block fits.
  const int64_t rows = std::max<int64_t>(1, budget / std::max<int64_t>(1, h * t));
  std::vector<at::Tensor> samples;
  samples.reserve(b);
  for (int64_t i = 0; i < b; ++i) {
    at::Tensor qi = q5.narrow(0, i, 1), ki = k5.narrow(0, i, 1), vi = v5.narrow(0, i, 1);
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
