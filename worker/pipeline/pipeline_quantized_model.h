// PipelineQuantizedModel: the exporters' view (exporter::QuantizedModel) of a
// job's result, over the checkpoint and the job's scratch store.
//
// Values come from the scratch store where the job changed a tensor and from
// the checkpoint otherwise; the exact weight parameters the job used (which
// GPTQ fits while it runs, so they cannot be recomputed) are read back from
// the scratch store's reserved names.
#ifndef QUANTD_WORKER_PIPELINE_PIPELINE_QUANTIZED_MODEL_H_
#define QUANTD_WORKER_PIPELINE_PIPELINE_QUANTIZED_MODEL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/export/quantized_model.h"
#include "worker/models/causal_lm.h"
#include "worker/pipeline/layer_plan.h"

namespace quantd::pipeline {

// Reserved scratch-store names of a module's weight parameters.
std::string WeightScaleKey(const std::string& module);
std::string WeightZeroPointKey(const std::string& module);
std::string WeightGroupIndexKey(const std::string& module);
// A llama.cpp recipe job's importance sums (QuantizedModel::WeightImportance).
std::string ImportanceSumKey(const std::string& module);
std::string ImportanceCountKey(const std::string& module);
// A recipe job's ggml blocks of a weight GPTQ quantized
// (QuantizedModel::GgmlBlocks).
std::string GgmlBlocksKey(const std::string& module);

// The exact weight parameters the job stored for `module` (quantized with
// `spec`), from `values`; an empty QParams when none were stored.
StatusOr<quant::QParams> LoadWeightQParams(const io::TensorSource& values,
                                           const std::string& module, const quant::QuantSpec& spec);

class PipelineQuantizedModel final : public exporter::QuantizedModel {
 public:
  // `plans` by module name (every linear of the model, quantized or not), in
  // any order; layers() lists the quantized ones in model order. `values` is
  // the scratch store overlaid on the checkpoint. `static_inputs` and
  // `static_outputs` hold calibrated activation parameters by module name.
  // When the model ties its head to the embedding but `values` holds an
  // lm_head.weight (the rotation fuses the final norm into a copy of the
  // head), the model is exported untied.
  PipelineQuantizedModel(std::string model_dir, const models::CausalLM& model,
                         std::shared_ptr<const io::TensorSource> values,
                         const std::map<std::string, LayerPlan>& plans,
                         config::QuantConfig quant_config,
                         const std::map<std::string, quant::QParams>& static_inputs = {},
                         const std::map<std::string, quant::QParams>& static_outputs = {});

  const std::string& model_dir() const override { return model_dir_; }
  // The model's config, untied when the job gave a tied head its own weight.
  const models::ModelConfig& config() const override { return config_; }
  // The checkpoint, plus lm_head.weight when the job untied the head.
  const io::TensorSource& original() const override { return *original_; }
  StatusOr<at::Tensor> Load(const std::string& tensor_name) const override;
  const std::vector<exporter::QuantizedLayer>& layers() const override { return layers_; }
  const exporter::QuantizedLayer* FindLayer(const std::string& module_name) const override;
  StatusOr<quant::QParams> WeightQParams(const std::string& module_name) const override;
  StatusOr<at::Tensor> WeightGroupIndex(const std::string& module_name) const override;
  StatusOr<ImportanceSums> WeightImportance(const std::string& module_name) const override;
  StatusOr<at::Tensor> GgmlBlocks(const std::string& module_name) const override;
  const config::QuantConfig& quant_config() const override { return quant_config_; }

 private:
  std::string model_dir_;
  const models::CausalLM& model_;
  models::ModelConfig config_;
  std::shared_ptr<const io::TensorSource> original_;
  std::shared_ptr<const io::TensorSource> values_;
  config::QuantConfig quant_config_;
  std::vector<exporter::QuantizedLayer> layers_;
  std::map<std::string, size_t> index_;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_PIPELINE_QUANTIZED_MODEL_H_
