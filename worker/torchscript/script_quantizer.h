// ScriptQuantizer: a TorchScript model with quantd's quantizers in it.
//
// Every quantizable layer (ScriptModel::Layers) gets its LayerPlan from the
// job's planner by qualified name and type; its weight (and bias) are
// fake-quantized once (quant_modules::ModuleWeight) and its input and output
// quantizers (quant_modules::ActivationQuantizer) run through the activation
// hooks. The same module runs in three modes:
//  - float: the original weights, hooks pass tensors through;
//  - observe: float as well, and every static quantizer's observer sees
//    its layer's input / output (calibration sees float activations, as
//    PyTorch's post-training prepare does);
//  - quantized: fake-quantized weights and activations;
//  - train: the weights a trainer passes in, activations fake-quantized
//    with straight-through gradients (quantization-aware training).
// Default per-channel and per-group axes follow each layer's layout: a
// Conv2d weight [out, in / groups, kh, kw] keeps channels on axis 0 and
// groups along axis 1; a ConvTranspose2d weight [in, out / groups, kh, kw]
// the other way round.
#ifndef QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QUANTIZER_H_
#define QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QUANTIZER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant_modules/activation_quantizer.h"
#include "worker/quant_modules/module_weight.h"
#include "worker/torchscript/activation_hooks.h"
#include "worker/torchscript/script_model.h"

namespace quantd::torchscript {

struct QuantizedLayer {
  ScriptLayer layer;
  pipeline::LayerPlan plan;
  at::Tensor float_weight;
  c10::IValue float_bias;  // None or a tensor
  quant_modules::ModuleWeight weight;
  quant_modules::ModuleWeight bias;
  quant_modules::ActivationQuantizer input;
  quant_modules::ActivationQuantizer output;
  // A bias quantization-aware training changed (the quantized model's; the
  // float model keeps float_bias). Undefined otherwise.
  at::Tensor trained_bias;
};

class ScriptQuantizer : public HookTable {
 public:
  enum class Mode { kFloat, kObserve, kQuantized, kCollect, kTrain, kAlone };

  // INVALID_ARGUMENT naming the layer when a spec does not fit its weight;
  // FAILED_PRECONDITION when the plan quantizes nothing.
  static StatusOr<std::unique_ptr<ScriptQuantizer>> Create(ScriptModel& model,
                                                           const pipeline::LayerPlanner& planner);

  // Runs forward in `mode`.
  StatusOr<at::Tensor> Forward(Mode mode, const std::vector<at::Tensor>& inputs);
  // For an algorithm that fits layer `slot` (GPTQ): forward with the
  // fake-quantized weights of layers [0, quantized_before) and float ones
  // elsewhere, activations unquantized, handing layer `slot`'s input to
  // `on_input`.
  using InputSink = std::function<Status(const at::Tensor&)>;
  StatusOr<at::Tensor> ForwardCollecting(size_t slot, size_t quantized_before,
                                         const InputSink& on_input,
                                         const std::vector<at::Tensor>& inputs);
  // The per-layer sensitivity (docs/sensitivity.md): forward with layer
  // `slot` alone quantized, its fake-quantized weight and its input
  // quantizer (a static one as calibrated); every other layer float, no
  // output quantizer.
  StatusOr<at::Tensor> ForwardAlone(size_t slot, const std::vector<at::Tensor>& inputs);
  // Quantization-aware training: forward with autograd, layer i holding
  // weights[i] and biases[i] where defined (its float ones elsewhere), and
  // every activation quantizer applied as q(x) + (x - x.detach()): the
  // value q(x), the gradient straight through.
  StatusOr<at::Tensor> ForwardTraining(const std::vector<at::Tensor>& weights,
                                       const std::vector<at::Tensor>& biases,
                                       const std::vector<at::Tensor>& inputs);
  // The bias the quantized model uses in layer `slot` (trained).
  Status SetTrainedBias(size_t slot, at::Tensor bias);
  // Replaces layer `slot`'s fake-quantized weight with one an algorithm
  // fitted (same shape), quantized with `qparams`.
  Status SetFittedWeight(size_t slot, at::Tensor fake, quant::QParams qparams);
  // Fixes every static quantizer's parameters from what kObserve saw.
  Status FinishCalibration();
  // Whether a static activation quantizer needs calibration data.
  bool NeedsCalibration() const;

  const std::vector<QuantizedLayer>& layers() const { return layers_; }
  // The module, with whichever weights the last forward used.
  torch::jit::Module& module() { return model_.module(); }
  ScriptModel& model() { return model_; }
  // Puts the fake-quantized weights into the module (as kQuantized does).
  Status UseQuantizedWeights() { return UseWeights(true); }
  // Puts the float weights into the module (as kFloat does), for an
  // algorithm that runs forward under its own hooks.
  Status UseFloatWeights() { return UseWeights(false); }
  // Replaces layer `slot`'s float weight and (when defined) bias with ones a
  // rescaling algorithm made (the float model computes the same function)
  // and quantizes the new weight. Before calibration only.
  Status SetFloatWeight(size_t slot, at::Tensor weight, at::Tensor bias);
  // Quantized layers / all quantizable layers.
  int quantized_layers() const;

  StatusOr<at::Tensor> OnActivation(int64_t slot, HookSide side, const at::Tensor& x) override;

 private:
  explicit ScriptQuantizer(ScriptModel& model) : model_(model) {}
  // Puts layer i's fake-quantized weight in the module when quantized(i),
  // its float weight otherwise.
  Status UseWeights(const std::function<bool(size_t)>& quantized);
  Status UseWeights(bool quantized) {
    return UseWeights([quantized](size_t) { return quantized; });
  }

  ScriptModel& model_;
  std::vector<QuantizedLayer> layers_;
  Mode mode_ = Mode::kFloat;
  // What the module holds now, per layer: kHeldFloat, kHeldQuantized, or
  // kHeldOther (a trainer's tensors).
  enum Held : int8_t { kHeldFloat, kHeldQuantized, kHeldOther };
  std::vector<Held> held_;
  size_t collect_slot_ = 0;  // kCollect's and kAlone's layer
  const InputSink* collect_ = nullptr;
};

// The spec with the layer type's default axes applied (see above).
std::optional<quant::QuantSpec> WithLayerAxes(std::optional<quant::QuantSpec> spec,
                                              const std::string& layer_type);

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_SCRIPT_QUANTIZER_H_
