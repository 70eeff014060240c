// SmoothQuant (Xiao et al.) and AutoSmoothQuant.
//
// Activations of LLMs have a few channels with much larger magnitudes than
// the rest, which per-tensor activation quantization handles badly; weights
// do not. SmoothQuant moves part of that range into the weights with a
// per-input-channel scale folded into the previous op (channel_scaling.h):
//   s_j = clamp(max|x_j|^α / max|W_:,j|^(1-α), scale_clamp_min)
// where max|x_j| is taken over every calibration token entering the group
// and max|W_:,j| over every linear of the group (they share the input; the
// weight maximum is floored at 1e-5 as in the reference). α is per model
// (default 0.5) with per-layer overrides.
//
// AutoSmoothQuant searches α per group instead, over a grid (default 0.0 to
// 1.0 in steps of 0.05): for each candidate the group is smoothed, the whole
// block is fake-quantized as the plan asks (weights round-to-nearest, inputs
// dynamic or static-calibrated), and the candidate with the least block
// output MSE against the float block wins. Groups are searched in
// true-sequential order, each with the earlier groups' choices applied.
//
// Both run before weight rounding (and before GPTQ when combined); they only
// rescale, the pipeline (or GPTQ) quantizes.
#ifndef QUANTD_WORKER_ALGO_SMOOTHQUANT_H_
#define QUANTD_WORKER_ALGO_SMOOTHQUANT_H_

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/pipeline/block_algorithm.h"

namespace quantd::algo {

using config::SmoothQuantOptions;
using config::AutoSmoothQuantOptions;

// The SmoothQuant scales of one group: act_absmax [in] = max|x_j| over the
// calibration tokens; weights = the group's linears ([out_i, in] each).
StatusOr<at::Tensor> SmoothQuantScales(const at::Tensor& act_absmax,
                                       const std::vector<at::Tensor>& weights, double alpha,
                                       double scale_clamp_min = 1e-5);

// The α of a group of modules: the first alpha_overrides glob that matches
// one of them, else options.alpha.
double SmoothQuantAlpha(const SmoothQuantOptions& options, const std::vector<std::string>& modules);

class SmoothQuantAlgorithm final : public pipeline::BlockAlgorithm {
 public:
  explicit SmoothQuantAlgorithm(SmoothQuantOptions options = {}) : options_(std::move(options)) {}
  const char* name() const override { return "smoothquant"; }
  const SmoothQuantOptions& options() const { return options_; }
  Status Apply(pipeline::BlockAlgorithmContext& ctx) override;

 private:
  SmoothQuantOptions options_;
};

class AutoSmoothQuantAlgorithm final : public pipeline::BlockAlgorithm {
 public:
  explicit AutoSmoothQuantAlgorithm(AutoSmoothQuantOptions options = {}) : options_(options) {}
  const char* name() const override { return "autosmoothquant"; }
  const AutoSmoothQuantOptions& options() const { return options_; }
  Status Apply(pipeline::BlockAlgorithmContext& ctx) override;

  // The α chosen for each group's first linear in the last Apply.
  const std::vector<std::pair<std::string, double>>& chosen() const { return chosen_; }

 private:
  AutoSmoothQuantOptions options_;
  std::vector<std::pair<std::string, double>> chosen_;
};

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_SMOOTHQUANT_H_
