#include "worker/pipeline/pipeline_quantized_model.h"

#include <algorithm>
#include <utility>

#include "worker/models/layer_shapes.h"

namespace quantd::pipeline {

std::string WeightScaleKey(const std::string& module) {
  return "__quantd__/" + module + ".weight_scale";
}
std::string WeightZeroPointKey(const std::string& module) {
  return "__quantd__/" + module + ".weight_zero_point";
}
std::string WeightGroupIndexKey(const std::string& module) {
  return "__quantd__/" + module + ".weight_g_idx";
}

std::string ImportanceSumKey(const std::string& module) {
  return "__quantd__/" + module + ".imatrix_in_sum2";
}
std::string ImportanceCountKey(const std::string& module) {
  return "__quantd__/" + module + ".imatrix_count";
}
std::string GgmlBlocksKey(const std::string& module) {
  return "__quantd__/" + module + ".ggml_blocks";
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

// The checkpoint plus one tensor the job added (an untied lm_head.weight),
// listed with the storage dtype and file of the tensor it was derived from.
class AddedTensorSource final : public io::TensorSource {
 public:
  AddedTensorSource(const io::TensorSource& base, std::shared_ptr<const io::TensorSource> values,
                    io::TensorInfo added)
      : base_(base), values_(std::move(values)), added_(std::move(added)) {}

  std::vector<std::string> Names() const override {
    std::vector<std::string> names = base_.Names();
    names.insert(std::lower_bound(names.begin(), names.end(), added_.name), added_.name);
    return names;
  }
  const io::TensorInfo* Find(const std::string& name) const override {
    return name == added_.name ? &added_ : base_.Find(name);
  }
  StatusOr<at::Tensor> Load(const std::string& name, at::ScalarType dtype) const override {
    return name == added_.name ? values_->Load(name, dtype) : base_.Load(name, dtype);
  }
  std::map<std::string, std::string> Metadata() const override { return base_.Metadata(); }
  std::string Description() const override { return base_.Description(); }

 private:
  const io::TensorSource& base_;
  std::shared_ptr<const io::TensorSource> values_;
  io::TensorInfo added_;
};

}  // namespace

PipelineQuantizedModel::PipelineQuantizedModel(
    std::string model_dir, const models::CausalLM& model,
    std::shared_ptr<const io::TensorSource> values, const std::map<std::string, LayerPlan>& plans,
    config::QuantConfig quant_config, const std::map<std::string, quant::QParams>& static_inputs,
    const std::map<std::string, quant::QParams>& static_outputs)
    : model_dir_(std::move(model_dir)),
      model_(model),
      config_(model.config()),
      values_(std::move(values)),
      quant_config_(std::move(quant_config)) {
  // Borrowed: the model outlives this view.
  original_ = std::shared_ptr<const io::TensorSource>(&model_.weights(),
                                                      [](const io::TensorSource*) {});
  const std::string head = model_.layout().lm_head.name + ".weight";
  const std::string embedding = model_.layout().token_embedding.name + ".weight";
  const io::TensorInfo* tied = model_.weights().Find(embedding);
  if (config_.tie_word_embeddings && model_.weights().Find(head) == nullptr && tied != nullptr &&
      values_->Find(head) != nullptr) {
    io::TensorInfo info = *values_->Find(head);
    info.dtype = tied->dtype;
    info.file = tied->file;
    info.nbytes = tied->nbytes;  // same shape and dtype
    original_ = std::make_shared<AddedTensorSource>(model_.weights(), values_, std::move(info));
    config_.tie_word_embeddings = false;
  }
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

StatusOr<at::Tensor> PipelineQuantizedModel::WeightGroupIndex(
    const std::string& module_name) const {
  const std::string key = WeightGroupIndexKey(module_name);
  if (!values_->Find(key)) return at::Tensor();
  // Stored as float32: column indices are whole numbers below 2^24.
  QD_ASSIGN_OR_RETURN(at::Tensor g, values_->Load(key, at::kFloat));
  return g.to(at::kInt);
}

StatusOr<exporter::QuantizedModel::ImportanceSums> PipelineQuantizedModel::WeightImportance(
    const std::string& module_name) const {
  ImportanceSums out;
  if (!values_->Find(ImportanceSumKey(module_name))) return out;
  QD_ASSIGN_OR_RETURN(out.sum2, values_->Load(ImportanceSumKey(module_name), at::kFloat));
  QD_ASSIGN_OR_RETURN(at::Tensor count, values_->Load(ImportanceCountKey(module_name), at::kFloat));
  out.count = count.item<float>();
  return out;
}

StatusOr<at::Tensor> PipelineQuantizedModel::GgmlBlocks(const std::string& module_name) const {
  if (!values_->Find(GgmlBlocksKey(module_name))) return at::Tensor();
  return values_->Load(GgmlBlocksKey(module_name), at::kByte);
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
