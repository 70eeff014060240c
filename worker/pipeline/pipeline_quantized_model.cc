#include "worker/pipeline/pipeline_quantized_model.h"

#include <utility>

#include "worker/models/layer_shapes.h"

namespace quantd::pipeline {

std::string WeightScaleKey(const std::string& module) {
  return "__quantd__/" + module + ".weight_scale";
}
std::string WeightZeroPointKey(const std::string& module) {
  return "__quantd__/" + module + ".weight_zero_point";
}

namespace {

std::optional<exporter::ActivationQuantizer> Activation(
    const std::optional<quant::QuantSpec>& spec, const std::string& name,
    const std::map<std::string, quant::QParams>& calibrated) {
  if (!spec) return std::nullopt;
  exporter::ActivationQuantizer q{*spec, std::nullopt};
  if (auto it = calibrated.find(name); it != calibrated.end()) q.static_qparams = it->second;
  return q;
}

}  // namespace

PipelineQuantizedModel::PipelineQuantizedModel(
    std::string model_dir, const models::CausalLM& model,
    std::shared_ptr<const io::TensorSource> values, const std::map<std::string, LayerPlan>& plans,
    std::string quant_config_json, const std::map<std::string, quant::QParams>& static_inputs,
    const std::map<std::string, quant::QParams>& static_outputs)
    : model_dir_(std::move(model_dir)),
      model_(model),
      values_(std::move(values)),
      quant_config_json_(std::move(quant_config_json)) {
  for (const auto& layer : models::ListLinearLayers(model_.config())) {
    auto it = plans.find(layer.name);
    if (it == plans.end() || !it->second.quantized()) continue;
    exporter::QuantizedLayer q;
    q.name = layer.name;
    q.type = layer.type;
    q.weight = it->second.weight;
    q.bias = it->second.bias;
    q.input = Activation(it->second.input, layer.name, static_inputs);
    q.output = Activation(it->second.output, layer.name, static_outputs);
    index_[q.name] = layers_.size();
    layers_.push_back(std::move(q));
  }
}

StatusOr<at::Tensor> PipelineQuantizedModel::Load(const std::string& tensor_name) const {
  return values_->Load(tensor_name, at::kFloat);
}

const exporter::QuantizedLayer* PipelineQuantizedModel::FindLayer(
    const std::string& module_name) const {
  auto it = index_.find(module_name);
  return it == index_.end() ? nullptr : &layers_[it->second];
}

StatusOr<quant::QParams> PipelineQuantizedModel::WeightQParams(
    const std::string& module_name) const {
  const exporter::QuantizedLayer* layer = FindLayer(module_name);
  if (!layer || !layer->weight)
    return NotFoundError("layer " + module_name + " has no quantized weight");
  return LoadWeightQParams(*values_, module_name, *layer->weight);
}

StatusOr<quant::QParams> LoadWeightQParams(const io::TensorSource& values,
                                           const std::string& module,
                                           const quant::QuantSpec& spec) {
  quant::QParams qp;
  if (values.Find(WeightScaleKey(module))) {
    QD_ASSIGN_OR_RETURN(qp.scale, values.Load(WeightScaleKey(module), at::kFloat));
  }
  if (values.Find(WeightZeroPointKey(module))) {
    QD_ASSIGN_OR_RETURN(at::Tensor zp, values.Load(WeightZeroPointKey(module), at::kFloat));
    // Stored as float32; integer zero points are whole numbers, so this is exact.
    const bool float_zp = !spec.symmetric && spec.zero_point_type == quant::ZeroPointType::kFloat32;
    qp.zero_point = float_zp ? zp : zp.to(at::kInt);
  }
  return qp;
}

}  // namespace quantd::pipeline
