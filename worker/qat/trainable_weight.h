// TrainableWeight: a quantized weight under quantization-aware training
// (docs/qat.md), shared by TorchScript models (worker/torchscript/script_qat)
// and decoder blocks (worker/algo/block_qat).
//
// It holds a float latent weight W. Forward() is what a training forward
// uses: q(W), quantd's own fake quantization with the layer's spec and
// parameters, with the straight-through gradient W + (q(W) - W).detach().
// With a learned scale (LSQ, learned step size), for integer per-tensor and
// per-channel specs only, the scale s trains too:
// (clamp(round(W / s + z), qmin, qmax) - z) * s, rounding with a
// straight-through gradient (so W gets the clipped straight-through
// gradient) and the scale's gradient multiplied by
// 1 / sqrt(elements per scale * qmax). Final() is the trained weight
// quantized with quantd's arithmetic and the final parameters, the values a
// job evaluates and exports.
#ifndef QUANTD_WORKER_QAT_TRAINABLE_WEIGHT_H_
#define QUANTD_WORKER_QAT_TRAINABLE_WEIGHT_H_

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::qat {

class TrainableWeight {
 public:
  // `weight` is the float weight (copied), `qparams` the parameters its
  // observer chose. INVALID_ARGUMENT (naming `what`) when `learn_scale` and
  // the spec is not an integer per-tensor / per-channel one.
  static StatusOr<TrainableWeight> Create(const at::Tensor& weight, quant::QuantSpec spec,
                                          quant::QParams qparams, bool learn_scale,
                                          const std::string& what);

  // Whether a spec can learn its scale.
  static bool CanLearnScale(const quant::QuantSpec& spec);

  // The fake-quantized weight with straight-through gradients.
  StatusOr<at::Tensor> Forward() const;
  // The tensors the optimizer updates: the latent weight, then the scale.
  std::vector<at::Tensor> Parameters() const;
  // The trained weight's parameters and its fake-quantized value.
  quant::QParams FinalQParams() const;
  StatusOr<at::Tensor> Final() const;

  const quant::QuantSpec& spec() const { return spec_; }
  const at::Tensor& latent() const { return latent_; }

 private:
  at::Tensor LearnedScaleForward() const;

  quant::QuantSpec spec_;
  quant::QParams qparams_;  // the observer's (with a learned scale: where it started)
  at::Tensor latent_;       // requires grad
  at::Tensor scale_;        // learned scale (requires grad), or undefined
  at::Tensor zero_point_;   // as float, for the learned-scale forward
  int64_t axis_ = 0;
  double grad_scale_ = 1;
  float qmin_ = 0;
  float qmax_ = 0;
};

}  // namespace quantd::qat

#endif  // QUANTD_WORKER_QAT_TRAINABLE_WEIGHT_H_
