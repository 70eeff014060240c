#include "worker/torchscript/script_quantizer.h"

#include <utility>

#include "worker/quant/spec.h"

namespace quantd::torchscript {

std::optional<quant::QuantSpec> WithLayerAxes(std::optional<quant::QuantSpec> spec,
                                              const std::string& layer_type) {
  if (!spec || spec->ch_axis) return spec;
  const bool conv = layer_type == "Conv2d";
  const bool transposed = layer_type == "ConvTranspose2d";
  if (!conv && !transposed) return spec;
  const bool grouped = spec->qscheme == quant::QScheme::kPerGroup || quant::IsMxType(spec->dtype);
  if (spec->qscheme == quant::QScheme::kPerChannel && !grouped) {
    spec->ch_axis = conv ? 0 : 1;
  } else if (grouped) {
    spec->ch_axis = conv ? 1 : 0;
  }
  return spec;
}

StatusOr<std::unique_ptr<ScriptQuantizer>> ScriptQuantizer::Create(
    ScriptModel& model, const pipeline::LayerPlanner& planner) {
  std::unique_ptr<ScriptQuantizer> q(new ScriptQuantizer(model));
  std::vector<ScriptLayer> layers = model.Layers();
  if (layers.empty()) {
    return FailedPreconditionError(
        "the model has no Linear, Conv2d, ConvTranspose2d, Embedding or EmbeddingBag submodule "
        "(a module frozen with torch.jit.freeze has none left: save it before freezing)");
  }
  QD_RETURN_IF_ERROR(InstallActivationHooks(model, layers));
  int quantized = 0;
  for (ScriptLayer& layer : layers) {
    QuantizedLayer l;
    l.plan = planner(layer.name, layer.type);
    const std::string& name = layer.name;
    try {
      l.float_weight = layer.module.attr("weight").toTensor();
      l.float_bias = layer.module.hasattr("bias") ? layer.module.attr("bias") : c10::IValue();
    } catch (const std::exception&) {
      return InvalidArgumentError(name + ": a " + layer.type + " without a weight tensor");
    }
    const at::Tensor bias = l.float_bias.isTensor() ? l.float_bias.toTensor() : at::Tensor();
    QD_ASSIGN_OR_RETURN(
        l.weight, quant_modules::ModuleWeight::Create(
                      l.float_weight, WithLayerAxes(l.plan.weight, layer.type), name + " weight"));
    QD_ASSIGN_OR_RETURN(l.bias,
                        quant_modules::ModuleWeight::Create(bias, l.plan.bias, name + " bias"));
    const bool float_input = HasFloatInput(layer.type);
    QD_ASSIGN_OR_RETURN(l.input, quant_modules::ActivationQuantizer::Create(
                                     float_input ? l.plan.input : std::nullopt, name + " input"));
    QD_ASSIGN_OR_RETURN(
        l.output, quant_modules::ActivationQuantizer::Create(l.plan.output, name + " output"));
    if (l.plan.quantized()) ++quantized;
    l.layer = std::move(layer);
    q->layers_.push_back(std::move(l));
  }
  if (quantized == 0) {
    return FailedPreconditionError("the quantization config quantizes none of the model's " +
                                   std::to_string(q->layers_.size()) +
                                   " layers (check exclude and the layer types it names)");
  }
  return q;
}

int ScriptQuantizer::quantized_layers() const {
  int n = 0;
  for (const auto& l : layers_) n += l.plan.quantized() ? 1 : 0;
  return n;
}

bool ScriptQuantizer::NeedsCalibration() const {
  for (const auto& l : layers_) {
    if (l.input.is_static() || l.output.is_static()) return true;
  }
  return false;
}

Status ScriptQuantizer::UseWeights(const std::function<bool(size_t)>& quantized) {
  held_.resize(layers_.size(), kHeldFloat);
  for (size_t i = 0; i < layers_.size(); ++i) {
    QuantizedLayer& l = layers_[i];
    const Held want = quantized(i) ? kHeldQuantized : kHeldFloat;
    if (want == held_[i]) continue;
    const at::Tensor& w = l.float_weight;
    if (want == kHeldQuantized) {
      QD_ASSIGN_OR_RETURN(at::Tensor wq, l.weight.Effective(w.scalar_type(), w.device()));
      l.layer.module.setattr("weight", wq);
      if (l.bias.quantized()) {
        QD_ASSIGN_OR_RETURN(at::Tensor bq, l.bias.Effective(w.scalar_type(), w.device()));
        l.layer.module.setattr("bias", bq);
      } else if (l.trained_bias.defined()) {
        l.layer.module.setattr("bias", l.trained_bias);
      } else if (held_[i] == kHeldOther) {
        l.layer.module.setattr("bias", l.float_bias);
      }
    } else {
      l.layer.module.setattr("weight", w);
      if (l.bias.quantized() || l.trained_bias.defined() || held_[i] == kHeldOther) {
        l.layer.module.setattr("bias", l.float_bias);
      }
    }
    held_[i] = want;
  }
  return OkStatus();
}

StatusOr<at::Tensor> ScriptQuantizer::ForwardTraining(const std::vector<at::Tensor>& weights,
                                                      const std::vector<at::Tensor>& biases,
                                                      const std::vector<at::Tensor>& inputs) {
  if (weights.size() != layers_.size() || biases.size() != layers_.size()) {
    return InternalError("ForwardTraining needs a weight and a bias entry per layer");
  }
  QD_RETURN_IF_ERROR(UseWeights(false));
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!weights[i].defined() && !biases[i].defined()) continue;
    if (weights[i].defined()) layers_[i].layer.module.setattr("weight", weights[i]);
    if (biases[i].defined()) layers_[i].layer.module.setattr("bias", biases[i]);
    held_[i] = kHeldOther;
  }
  mode_ = Mode::kTrain;
  HookScope scope(this);
  auto out = model_.Forward(inputs, /*gradients=*/true);
  if (!scope.status().ok()) return scope.status();
  return out;
}

Status ScriptQuantizer::SetTrainedBias(size_t slot, at::Tensor bias) {
  if (slot >= layers_.size()) return InternalError("no layer " + std::to_string(slot));
  layers_[slot].trained_bias = std::move(bias);
  if (slot < held_.size()) held_[slot] = kHeldOther;  // refreshed at the next forward
  return OkStatus();
}

StatusOr<at::Tensor> ScriptQuantizer::ForwardCollecting(size_t slot, size_t quantized_before,
                                                        const InputSink& on_input,
                                                        const std::vector<at::Tensor>& inputs) {
  if (slot >= layers_.size()) return InternalError("no layer " + std::to_string(slot));
  QD_RETURN_IF_ERROR(UseWeights([quantized_before](size_t i) { return i < quantized_before; }));
  mode_ = Mode::kCollect;
  collect_slot_ = slot;
  collect_ = &on_input;
  HookScope scope(this);
  auto out = model_.Forward(inputs);
  collect_ = nullptr;
  if (!scope.status().ok()) return scope.status();
  return out;
}

Status ScriptQuantizer::SetFloatWeight(size_t slot, at::Tensor weight, at::Tensor bias) {
  if (slot >= layers_.size()) return InternalError("no layer " + std::to_string(slot));
  QuantizedLayer& l = layers_[slot];
  const std::string& name = l.layer.name;
  if (!weight.sizes().equals(l.float_weight.sizes()) ||
      (bias.defined() &&
       !(l.float_bias.isTensor() && bias.sizes().equals(l.float_bias.toTensor().sizes())))) {
    return InternalError(name + ": a rescaled weight or bias changed shape");
  }
  QD_ASSIGN_OR_RETURN(l.weight,
                      quant_modules::ModuleWeight::Create(
                          weight, WithLayerAxes(l.plan.weight, l.layer.type), name + " weight"));
  l.float_weight = weight;
  l.layer.module.setattr("weight", weight);
  if (bias.defined()) {
    QD_ASSIGN_OR_RETURN(l.bias,
                        quant_modules::ModuleWeight::Create(bias, l.plan.bias, name + " bias"));
    l.float_bias = bias;
    l.layer.module.setattr("bias", bias);
  }
  if (slot < held_.size()) held_[slot] = kHeldFloat;  // the module holds the new float ones
  return OkStatus();
}

Status ScriptQuantizer::SetFittedWeight(size_t slot, at::Tensor fake, quant::QParams qparams) {
  if (slot >= layers_.size() || !layers_[slot].plan.weight) {
    return InternalError("no quantized weight in slot " + std::to_string(slot));
  }
  QuantizedLayer& l = layers_[slot];
  QD_ASSIGN_OR_RETURN(
      l.weight, quant_modules::ModuleWeight::CreateFitted(
                    l.float_weight, std::move(fake), *WithLayerAxes(l.plan.weight, l.layer.type),
                    std::move(qparams), l.layer.name + " weight"));
  if (slot < held_.size() && held_[slot] == kHeldQuantized) {
    // The module holds the weight this replaced.
    QD_ASSIGN_OR_RETURN(at::Tensor wq,
                        l.weight.Effective(l.float_weight.scalar_type(), l.float_weight.device()));
    l.layer.module.setattr("weight", wq);
  }
  return OkStatus();
}

StatusOr<at::Tensor> ScriptQuantizer::Forward(Mode mode, const std::vector<at::Tensor>& inputs) {
  QD_RETURN_IF_ERROR(UseWeights(mode == Mode::kQuantized));
  mode_ = mode;
  HookScope scope(this);
  auto out = model_.Forward(inputs);
  if (!scope.status().ok()) return scope.status();
  return out;
}

StatusOr<at::Tensor> ScriptQuantizer::ForwardAlone(size_t slot,
                                                   const std::vector<at::Tensor>& inputs) {
  if (slot >= layers_.size())
    return InternalError("ForwardAlone: no layer " + std::to_string(slot));
  QD_RETURN_IF_ERROR(UseWeights([slot](size_t i) { return i == slot; }));
  mode_ = Mode::kAlone;
  collect_slot_ = slot;
  HookScope scope(this);
  auto out = model_.Forward(inputs);
  if (!scope.status().ok()) return scope.status();
  return out;
}

StatusOr<at::Tensor> ScriptQuantizer::OnActivation(int64_t slot, HookSide side,
                                                   const at::Tensor& x) {
  if (slot < 0 || slot >= static_cast<int64_t>(layers_.size())) {
    return InternalError("activation hook for unknown slot " + std::to_string(slot));
  }
  QuantizedLayer& l = layers_[slot];
  quant_modules::ActivationQuantizer& q = side == HookSide::kInput ? l.input : l.output;
  switch (mode_) {
    case Mode::kFloat:
      return x;
    case Mode::kObserve:
      QD_RETURN_IF_ERROR(q.Observe(x));
      return x;
    case Mode::kQuantized:
      return q.Apply(x);
    case Mode::kTrain: {
      if (!q.enabled()) return x;
      QD_ASSIGN_OR_RETURN(at::Tensor fq, q.Apply(x.detach()));
      return fq + (x - x.detach());  // the value fq, the gradient straight through
    }
    case Mode::kAlone:
      if (side == HookSide::kInput && static_cast<size_t>(slot) == collect_slot_) return q.Apply(x);
      return x;
    case Mode::kCollect:
      if (side == HookSide::kInput && static_cast<size_t>(slot) == collect_slot_ &&
          collect_ != nullptr) {
        QD_RETURN_IF_ERROR((*collect_)(x));
      }
      return x;
  }
  return x;
}

Status ScriptQuantizer::FinishCalibration() {
  for (QuantizedLayer& l : layers_) {
    QD_RETURN_IF_ERROR(l.input.Finish());
    QD_RETURN_IF_ERROR(l.output.Finish());
  }
  return OkStatus();
}

}  // namespace quantd::torchscript
