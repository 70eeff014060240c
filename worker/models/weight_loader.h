// WeightLoader: reads a model's tensors from a TensorSource by Hugging Face
// name, checking each shape against the one config.json implies.
//
// A tensor whose shape disagrees with config.json is DATA_LOSS naming the
// tensor, its file, the expected and the stored shape; a missing tensor is
// the source's NOT_FOUND. Checkpoints saved without the model prefix
// ("h.0.attn..." instead of "transformer.h.0.attn...") are found through the
// layout's alias prefix.
#ifndef QUANTD_WORKER_MODELS_WEIGHT_LOADER_H_
#define QUANTD_WORKER_MODELS_WEIGHT_LOADER_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/tensor_source.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/model_options.h"

namespace quantd::models {

// A host tensor on `device`; to a GPU through page-locked staging memory and
// an asynchronous copy (later kernels on the device are ordered after it).
at::Tensor ToDevice(const at::Tensor& host, const at::Device& device);

class WeightLoader {
 public:
  WeightLoader(const io::TensorSource& source, const ModelLayout& layout,
               const ModelOptions& options)
      : source_(source), layout_(layout), options_(options) {}

  // The name under which `canonical` is stored in the source (the canonical
  // name itself, or its alias); empty when neither exists.
  std::string Resolve(const std::string& canonical) const;
  bool Has(const std::string& canonical) const { return !Resolve(canonical).empty(); }

  // Loads `canonical` with `shape` in the options' dtype and device.
  // `transposed`: the file stores the 2-D transpose of `shape` (GPT-2
  // Conv1D); the result is in `shape` layout, contiguous.
  StatusOr<at::Tensor> Load(const std::string& canonical, const std::vector<int64_t>& shape,
                            bool transposed = false) const;

  StatusOr<std::pair<at::Tensor, at::Tensor>> LoadLinear(const LinearLayerInfo& info) const;
  StatusOr<std::pair<at::Tensor, at::Tensor>> LoadNorm(const NormInfo& info) const;

  const ModelOptions& options() const { return options_; }

 private:
  const io::TensorSource& source_;
  const ModelLayout& layout_;
  const ModelOptions& options_;
};

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_WEIGHT_LOADER_H_
