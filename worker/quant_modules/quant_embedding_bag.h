// QuantEmbeddingBag: PyTorch's EmbeddingBag (sums, means or maxima of bags
// of table rows) with the weight and output quantizers of its resolved
// LayerPlan (layer type "EmbeddingBag"). Its input is indices, so a plan
// with an input spec is refused. It runs fake-quantized; Freeze() keeps only
// the table's real-quantized codes, dequantized at every forward.
//
// TorchScript jobs (worker/torchscript) quantize a model's own EmbeddingBag
// submodules with the same ModuleWeight and ActivationQuantizer.
#ifndef QUANTD_WORKER_QUANT_MODULES_QUANT_EMBEDDING_BAG_H_
#define QUANTD_WORKER_QUANT_MODULES_QUANT_EMBEDDING_BAG_H_

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/freeze.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant_modules/activation_quantizer.h"
#include "worker/quant_modules/module_weight.h"

namespace quantd::quant_modules {

enum class BagMode { kSum, kMean, kMax };

// A batch of bags: `indices` (1-D int64) split at `offsets` (1-D int64, the
// start of each bag, first 0), as torch.nn.EmbeddingBag takes them.
struct Bags {
  at::Tensor indices;
  at::Tensor offsets;
  // Optional, sum mode only (as PyTorch): one float weight per index, each
  // row scaled by it before the sum.
  at::Tensor per_sample_weights;
};

class QuantEmbeddingBag {
 public:
  // INVALID_ARGUMENT, naming the module, for a table that is not 2-D, a plan
  // with an input or bias spec, or a spec the table does not fit.
  static StatusOr<std::unique_ptr<QuantEmbeddingBag>> Create(std::string name, at::Tensor weight,
                                                             BagMode mode,
                                                             const pipeline::LayerPlan& plan);

  // Static output calibration over the batches' bag outputs.
  Status Calibrate(const std::vector<Bags>& batches);
  // [number of bags, dim]. INVALID_ARGUMENT for indices outside the table or
  // malformed offsets; FAILED_PRECONDITION for an uncalibrated static output.
  StatusOr<at::Tensor> Forward(const Bags& bags) const;
  StatusOr<pipeline::FreezeReport> Freeze();

  const std::string& name() const { return name_; }
  const ModuleWeight& weight() const { return weight_; }
  const ActivationQuantizer& output() const { return output_; }

 private:
  QuantEmbeddingBag() = default;
  StatusOr<at::Tensor> Reduce(const Bags& bags) const;  // no output quantization

  std::string name_;
  BagMode mode_ = BagMode::kSum;
  int64_t num_ = 0;
  int64_t dim_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  ModuleWeight weight_;
  ActivationQuantizer output_;
};

}  // namespace quantd::quant_modules

#endif  // QUANTD_WORKER_QUANT_MODULES_QUANT_EMBEDDING_BAG_H_
