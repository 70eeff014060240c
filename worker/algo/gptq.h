// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers"), as the reference toolkit runs it.
//
// A linear layer's weight is quantized one input column at a time; the
// rounding error of each column is spread over the columns not yet
// quantized, weighted by the inverse Hessian of the layer's inputs
// H = (2/n) sum x x^T. The numeric details follow the reference:
//  - H accumulates in float32 with the running update
//    H *= n/(n+b); n += b; x = sqrt(2/n) x; H += x x^T (n counts samples);
//  - dead columns (diag H == 0) get H_ii = 1 and a zero weight column;
//  - act_order permutes columns by diag H, descending;
//  - damping adds damp_percent * mean(diag H) to the diagonal, then
//    Hinv = cholesky(cholesky_inverse(cholesky(H)), upper);
//  - columns are processed in blocks of block_size, with per-column updates
//    inside a block and one lazy matrix update of the later columns after it;
//  - per-group parameters are fit when a group's first column is reached, on
//    the weights as updated so far (groups are runs of consecutive permuted
//    columns with act_order), or before the loop on the original weights
//    with static_groups;
//  - per-tensor and per-channel parameters are fit once, on the weight after
//    the dead columns are zeroed.
// A failed Cholesky factorisation is retried with damp_percent raised by
// damp_retry_step, at most max_damp_retries times; then the layer falls back
// to round-to-nearest and the result says so.
//
// GptqQuantizeWeight is the algorithm on one (weight, Hessian) pair;
// GptqAlgorithm runs it over a decoder block's linears in true-sequential
// order (q,k,v -> o -> gate,up -> down), each group's Hessian collected from
// a forward pass in which the groups before it are already quantized.
#ifndef QUANTD_WORKER_ALGO_GPTQ_H_
#define QUANTD_WORKER_ALGO_GPTQ_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::algo {

using config::GptqOptions;

// The running Hessian of one linear layer's inputs, H = (2/n) sum x x^T.
class HessianAccumulator {
 public:
  explicit HessianAccumulator(int64_t columns);

  // x: [..., columns] in any float dtype. A 3-D [B, T, C] batch counts B
  // samples (the reference's n); lower ranks count one. INVALID_ARGUMENT when
  // the last dimension is not `columns`. Inside a models::MatmulDtypeScope of
  // a 16-bit dtype (bfloat16 calibration) the Hessian is of x rounded to
  // that dtype, the values the layer's product consumed.
  Status Add(const at::Tensor& x);

  // [columns, columns] float32.
  const at::Tensor& hessian() const { return h_; }
  int64_t num_samples() const { return n_; }
  // Rows (tokens) added, whatever their batching.
  int64_t num_rows() const { return rows_; }

 private:
  Status AddAsConsumed(const at::Tensor& rows2d, int64_t b, at::ScalarType product);

  at::Tensor h_;
  int64_t n_ = 0;
  int64_t rows_ = 0;
};

// What every GPTQ run reports besides its weights.
struct GptqStats {
  // The Cholesky factorisation failed at every damping; the weight is
  // round-to-nearest (ggml's own quantizer for GptqQuantizeGgml).
  bool rtn_fallback = false;
  std::string fallback_reason;
  // The damping (relative to mean(diag H)) that succeeded, and how many
  // retries it took.
  double damp_percent = 0;
  int damp_retries = 0;
  // The reference's loss: sum over weights of (w - q)^2 / Hinv_ii^2 / 2.
  double loss = 0;
  // Where the time went, to the end of the device's work: the damped
  // Cholesky factorisations (retries included) and the column loop.
  double factor_seconds = 0;
  double loop_seconds = 0;
};

struct GptqResult : GptqStats {
  // The fake-quantized weight, original column order, the input's dtype.
  at::Tensor weight;
  // The parameters `weight` was quantized with, in the QParams shapes of the
  // spec: 0-dim (per_tensor), [out] (per_channel), [out, G] (per_group,
  // where group g holds the columns whose group_index is g).
  quant::QParams qparams;
  // int32 [in]: the group of each column. Defined only for act_order without
  // static_groups, where groups are runs of permuted columns; otherwise
  // column c is in group c / group_size.
  at::Tensor group_index;
};

// The factor GPTQ's column loop runs on: Hinv = cholesky(cholesky_inverse(
// cholesky(H + damp I)), upper) with damp = damp_percent * mean(diag H),
// retried with damp_percent raised by damp_retry_step at most
// max_damp_retries times. `h` float32 [in, in], dead columns already set.
struct DampedInverse {
  at::Tensor hinv;  // undefined when every damping failed
  double damp_percent = 0;
  int damp_retries = 0;
  std::string failure;  // why hinv is undefined, with the largest damping
};
DampedInverse FactorDampedHessian(const at::Tensor& h, const GptqOptions& options);

// GPTQ on one weight [out, in] with the Hessian of its inputs [in, in].
// Weight specs: integers (per_tensor, per_channel on axis 0, per_group along
// the input axis), FP8 (per_tensor, per_channel) and the MX formats (blocks
// of 32 along the input axis, fit like groups). INVALID_ARGUMENT for shapes
// that do not match or a spec the weight does not fit; UNIMPLEMENTED for
// casts and dynamic weight specs. Never throws. With the Hessian on a GPU
// the whole column loop runs there: the factorisations, the rounding of each
// column (the fake-quant kernels, bit for bit the CPU's), its error and the
// updates; the result is the same algorithm with other float rounding in the
// factorisations and matmuls, so codes can differ from a CPU run's near
// rounding ties.
StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, const at::Tensor& hessian,
                                        const quant::QuantSpec& spec,
                                        const GptqOptions& options = {});

// OK when GptqQuantizeWeight takes a [rows, cols] weight with `spec`;
// otherwise its INVALID_ARGUMENT or UNIMPLEMENTED, checked before any work.
Status CheckGptqWeightSpec(const quant::QuantSpec& spec, int64_t rows, int64_t cols);

// GptqQuantizeWeight with the column loop a GPU runs (tensor ops per
// column) on the Hessian's device, CPU included. On the CPU it gives the same
// bits as GptqQuantizeWeight, whose integer loop is scalar code there; the
// tests hold the two together.
StatusOr<GptqResult> GptqQuantizeWeightWithTensorOps(const at::Tensor& weight,
                                                     const at::Tensor& hessian,
                                                     const quant::QuantSpec& spec,
                                                     const GptqOptions& options = {});

// GPTQ on every linear of a block that the job's plan gives a weight spec.
// Records the parameters (ctx.quantized_weights), the float weights
// (ctx.float_weights) and, for act_order groups, the column groups
// (ctx.weight_group_index). A layer that falls back to round-to-nearest is
// reported as a WARNING log through ctx.observer.
class GptqAlgorithm final : public pipeline::BlockAlgorithm {
 public:
  explicit GptqAlgorithm(GptqOptions options = {}) : options_(options) {}
  const char* name() const override { return "gptq"; }
  Status Apply(pipeline::BlockAlgorithmContext& ctx) override;

  const GptqOptions& options() const { return options_; }

 private:
  GptqOptions options_;
};

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_GPTQ_H_
