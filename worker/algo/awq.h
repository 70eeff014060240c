// AWQ (Lin et al., "AWQ: Activation-aware Weight Quantization for LLM
// Compression and Acceleration"), as the reference implementations run it.
//
// For every linear group (or those the options' scaling_layers name,
// awq_layout.h; the others are left to the pipeline) whose previous op can
// absorb a scale (Llama:
// input_layernorm -> q,k,v; v -> o when the shapes match, i.e. no GQA;
// post_attention_layernorm -> gate,up; up -> down):
//  1. x̄ = per-channel mean |x| of the group's input (float block, all
//     calibration tokens);
//  2. for α in {0, 1/grid, ..., (grid-1)/grid}: s = clamp(x̄^α, 1e-4),
//     s /= sqrt(max(s) min(s)); the group's weights become Q(W s) / s and the
//     inspected module's output is compared with the float output (MSE);
//     the inspected module is the attention (o_proj's output) for q,k,v, the
//     MLP (down_proj's output) for gate,up, and the linear itself otherwise;
//  3. the best scales of all groups are folded in (previous op / s, group
//     columns * s), then
//  4. every linear except q and k gets a clip search: per (row, group) the
//     range max|w| * f for f in 1.0, 0.95, ..., 0.55 whose quantized partial
//     outputs on at most clip_max_tokens sampled tokens have the least MSE,
//     rows processed in chunks of 256 (64 when 256 does not divide);
//  5. the weights are quantized with AWQ's quantizer (AwqFakeQuantize).
#ifndef QUANTD_WORKER_ALGO_AWQ_H_
#define QUANTD_WORKER_ALGO_AWQ_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::algo {

using config::AwqOptions;

// AWQ's quantizer. For asymmetric integer specs with integer zero points the
// group min / max is not widened to include 0:
//   scale = clamp(max - min, 1e-5) / (qmax - qmin),
//   zero = clamp(-round(min / scale), 0, qmax - qmin)
// (stored as zero + qmin, the spec's code domain), then the spec's fake
// quantization with those parameters. Other specs use their own parameter
// rule. `used`, when not null, receives the parameters.
StatusOr<at::Tensor> AwqFakeQuantize(const at::Tensor& weight, const quant::QuantSpec& spec,
                                     quant::QParams* used = nullptr);

// The AWQ scale search of one group on captured activations, exposed for
// tests: x [tokens, in] the group's input; weights of its linears (each
// [out_i, in]) with their specs. Returns the scales [in] of the best α
// (written to *best_alpha) by the MSE of x W^T over the concatenated
// outputs, i.e. the inspected module is the group's linears themselves.
StatusOr<at::Tensor> AwqSearchScales(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                     const std::vector<quant::QuantSpec>& specs,
                                     const AwqOptions& options, double* best_alpha = nullptr);

// The clip search of one linear: x [tokens, in], w [out, in]. Returns the
// clamp bound per (row, group), [out, G] (G = 1 without groups).
StatusOr<at::Tensor> AwqSearchClip(const at::Tensor& x, const at::Tensor& w,
                                   const quant::QuantSpec& spec, const AwqOptions& options);

class AwqAlgorithm final : public pipeline::BlockAlgorithm {
 public:
  explicit AwqAlgorithm(AwqOptions options = {}) : options_(options) {}
  const AwqOptions& options() const { return options_; }
  const char* name() const override { return "awq"; }
  Status Apply(pipeline::BlockAlgorithmContext& ctx) override;

 private:
  AwqOptions options_;
};

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_AWQ_H_
