// TensorDataset: calibration, evaluation or training data for a TorchScript
// model, as one safetensors file:
//   input                 forward's one argument, first axis = samples; or
//   input.0, input.1, ... its arguments in order;
//   label   (int64 [N])   class labels, for top-1 accuracy (classifiers);
//   target  ([N, ...])    regression / denoising targets;
//   bucket  (int64 [N])   a group per sample (a denoiser's timestep bucket):
//                         the evaluation reports each group as well.
// Floating tensors load as float32, integer ones as int64. Any other name is
// refused (a misspelt "labels" would silently drop the accuracy).
#ifndef QUANTD_WORKER_TORCHSCRIPT_TENSOR_DATASET_H_
#define QUANTD_WORKER_TORCHSCRIPT_TENSOR_DATASET_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::torchscript {

struct TensorDatasetLimits {
  int64_t max_bytes = int64_t{8} << 30;  // all tensors together, as loaded
  int64_t max_buckets = 1024;
};

struct TensorDataset {
  std::vector<at::Tensor> inputs;
  at::Tensor label;   // undefined when absent
  at::Tensor target;  // undefined when absent
  at::Tensor bucket;  // undefined when absent

  int64_t size() const { return inputs.empty() ? 0 : inputs.front().size(0); }
  // Samples [begin, end) of every input.
  std::vector<at::Tensor> Batch(int64_t begin, int64_t end) const;
};

// INVALID_ARGUMENT (naming `path` and the tensor) for missing or extra
// inputs, unknown names, sample counts that differ, a label or bucket that
// is not int64 [N] with values in range, or a file over the limits;
// DATA_LOSS for a corrupt file. `num_inputs` is forward's argument count.
StatusOr<TensorDataset> LoadTensorDataset(const std::string& path, int num_inputs,
                                          const TensorDatasetLimits& limits = {});

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_TENSOR_DATASET_H_
