// QuantConv2d and QuantConvTranspose2d: a 2-D convolution (or transposed
// convolution) with the weight, bias, input and output quantizers of its
// resolved LayerPlan (layer type "Conv2d" / "ConvTranspose2d" in
// layer_type_quant_config). It runs fake-quantized; Freeze() keeps only the
// weight's real-quantized codes.
//
// Weights are PyTorch's layouts: Conv2d [out, in / groups, kh, kw],
// ConvTranspose2d [in, out / groups, kh, kw]. A per_channel weight spec
// without ch_axis quantizes the output channels: axis 0 for Conv2d, axis 1
// for ConvTranspose2d.
//
// TorchScript jobs (worker/torchscript) quantize a model's own Conv2d and
// ConvTranspose2d submodules with the same ModuleWeight and
// ActivationQuantizer; their quantized forward equals this module's.
#ifndef QUANTD_WORKER_QUANT_MODULES_QUANT_CONV_H_
#define QUANTD_WORKER_QUANT_MODULES_QUANT_CONV_H_

#include <ATen/ATen.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/freeze.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant_modules/activation_quantizer.h"
#include "worker/quant_modules/module_weight.h"

namespace quantd::quant_modules {

enum class ConvKind { kConv2d, kConvTranspose2d };

struct ConvOptions {
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> padding = {0, 0};
  std::array<int64_t, 2> dilation = {1, 1};
  std::array<int64_t, 2> output_padding = {0, 0};  // ConvTranspose2d only
  int64_t groups = 1;
};

class QuantConv {
 public:
  // INVALID_ARGUMENT, naming the module, for a weight that is not 4-D, a bias
  // of the wrong size, groups that do not divide the channels, or a spec the
  // weight does not fit.
  static StatusOr<std::unique_ptr<QuantConv>> Create(ConvKind kind, std::string name,
                                                     at::Tensor weight, at::Tensor bias,
                                                     const ConvOptions& options,
                                                     const pipeline::LayerPlan& plan);

  // The LayerPlanner's type name: "Conv2d" or "ConvTranspose2d".
  static const char* TypeName(ConvKind kind);

  // Static calibration: the input observer sees every batch; then, with the
  // input parameters fixed, the output observer sees the module's outputs
  // (quantized input and weight). Batches are [N, C, H, W].
  Status Calibrate(const std::vector<at::Tensor>& batches);

  // x: [N, C, H, W] in any float dtype. INVALID_ARGUMENT for a wrong shape;
  // FAILED_PRECONDITION when a static quantizer has not been calibrated.
  StatusOr<at::Tensor> Forward(const at::Tensor& x) const;

  // Keeps only the weight's (and a quantized bias's) codes; the outputs do
  // not change.
  StatusOr<pipeline::FreezeReport> Freeze();

  const std::string& name() const { return name_; }
  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const ModuleWeight& weight() const { return weight_; }
  const ActivationQuantizer& input() const { return input_; }
  const ActivationQuantizer& output() const { return output_; }

 private:
  QuantConv() = default;
  Status CheckInput(const at::Tensor& x) const;              // [N, in_channels, H, W]
  StatusOr<at::Tensor> Convolve(const at::Tensor& x) const;  // input quantized, no output

  ConvKind kind_ = ConvKind::kConv2d;
  std::string name_;
  ConvOptions options_;
  int64_t in_channels_ = 0;
  int64_t out_channels_ = 0;
  ModuleWeight weight_;
  ModuleWeight bias_;
  ActivationQuantizer input_;
  ActivationQuantizer output_;
};

}  // namespace quantd::quant_modules

#endif  // QUANTD_WORKER_QUANT_MODULES_QUANT_CONV_H_
