// Linear: one linear layer of a loaded block, with hooks for quantization.
//
// The pipeline intercepts every linear layer: an input hook observes the
// activations (calibration) or replaces them (fake-quantized inputs); an
// output hook does the same for outputs (FP8 KV cache on k/v, output
// quantizers); and a LinearKernel replaces y = x W^T + b entirely (frozen
// real-quantized weights dequantized on the fly). Weight and bias are plain
// mutable tensors in [out, in] layout, so algorithms (GPTQ, AWQ, rotation)
// edit them in place.
#ifndef QUANTD_WORKER_MODELS_LINEAR_H_
#define QUANTD_WORKER_MODELS_LINEAR_H_

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "worker/models/layer_shapes.h"

namespace quantd::models {

class Linear;

// Computes a linear layer's output from its input in place of x W^T + b.
class LinearKernel {
 public:
  virtual ~LinearKernel() = default;
  // `x` is [..., in_features]; returns [..., out_features]. May throw
  // c10::Error; the block's Forward turns that into a Status.
  virtual at::Tensor Forward(const Linear& layer, const at::Tensor& x) const = 0;
};

// Returns the tensor to use instead of `t` (return `t` itself to observe
// only). Called once per sub-batch of samples.
using LinearHook = std::function<at::Tensor(const Linear& layer, const at::Tensor& t)>;

class Linear {
 public:
  // `bias` is an undefined tensor when the layer has none.
  Linear(LinearLayerInfo info, at::Tensor weight, at::Tensor bias);

  const LinearLayerInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  int64_t in_features() const { return info_.in_features; }
  int64_t out_features() const { return info_.out_features; }

  // [out_features, in_features]. A kernel may leave it undefined to free
  // the float copy.
  at::Tensor& weight() { return weight_; }
  const at::Tensor& weight() const { return weight_; }
  // [out_features]; undefined when the layer has no bias.
  at::Tensor& bias() { return bias_; }
  const at::Tensor& bias() const { return bias_; }

  // Hooks run in the order added.
  void AddInputHook(LinearHook hook) { input_hooks_.push_back(std::move(hook)); }
  void AddOutputHook(LinearHook hook) { output_hooks_.push_back(std::move(hook)); }
  void ClearHooks() {
    input_hooks_.clear();
    output_hooks_.clear();
  }
  // nullptr restores x W^T + b.
  void SetKernel(std::shared_ptr<const LinearKernel> kernel) { kernel_ = std::move(kernel); }
  const LinearKernel* kernel() const { return kernel_.get(); }

  // input hooks -> kernel (or x W^T + b, in MatmulDtype() when set) ->
  // output hooks.
  at::Tensor Forward(const at::Tensor& x) const;

 private:
  // A tensor converted to another dtype, made again only when the source
  // changes: another tensor (an algorithm assigned a new weight) or a new
  // version of it (one changed it in place).
  struct DtypeCopy {
    at::Tensor copy, source;
    int64_t version = -1;
    const at::Tensor& Of(const at::Tensor& from, at::ScalarType t);
  };

  LinearLayerInfo info_;
  at::Tensor weight_;
  at::Tensor bias_;
  std::vector<LinearHook> input_hooks_;
  std::vector<LinearHook> output_hooks_;
  std::shared_ptr<const LinearKernel> kernel_;
  // The weight and bias in MatmulDtype(), for Forward.
  mutable DtypeCopy weight_copy_, bias_copy_;
};

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_LINEAR_H_
