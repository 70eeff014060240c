// InMemoryQuantizedModel: a QuantizedModel built in memory for exporter tests
// (the pipeline's own implementation reads its scratch store).
//
// It quantizes a Hugging Face checkpoint as a quark quantization_config JSON
// says: every Linear's weight round-to-nearest with worker/quant
// (ComputeQParams + FakeQuantize, parameters kept exactly), and static
// activation quantizers calibrated with running min / max over calibration
// token windows on the weight-quantized model (KV-cache scales of a block's
// k/v projections unified with max). The JSON is both the specs' source and,
// parsed, the model's quant_config, so what an exporter writes and what an
// importer reads back describe the same quantization.
#ifndef QUANTD_WORKER_EXPORT_TESTING_IN_MEMORY_QUANTIZED_MODEL_H_
#define QUANTD_WORKER_EXPORT_TESTING_IN_MEMORY_QUANTIZED_MODEL_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/quantized_model.h"
#include "worker/io/tensor_map_source.h"

namespace quantd::exporter::testing {

struct InMemoryQuantizeOptions {
  std::string model_dir;
  // The reference JSON (quantization_config object).
  std::string quant_config_json;
  // [N, T] int64 token ids for static activation quantizers; required when
  // the config has any.
  at::Tensor calibration_ids;
  // Keep only the weight parameters and fake-quantize a weight again at each
  // Load (bounded memory for large models, e.g. the export bench).
  bool quantize_on_load = false;
};

class InMemoryQuantizedModel final : public QuantizedModel {
 public:
  static StatusOr<std::unique_ptr<InMemoryQuantizedModel>> Create(
      const InMemoryQuantizeOptions& options);

  const std::string& model_dir() const override { return model_dir_; }
  const models::ModelConfig& config() const override { return config_; }
  const io::TensorSource& original() const override { return *original_; }
  StatusOr<at::Tensor> Load(const std::string& tensor_name) const override;
  const std::vector<QuantizedLayer>& layers() const override { return layers_; }
  const QuantizedLayer* FindLayer(const std::string& module_name) const override;
  StatusOr<quant::QParams> WeightQParams(const std::string& module_name) const override;
  const config::QuantConfig& quant_config() const override { return quant_config_; }

 private:
  InMemoryQuantizedModel() = default;
  Status Calibrate(const at::Tensor& ids);

  std::string model_dir_;
  models::ModelConfig config_;
  std::shared_ptr<const io::TensorSource> original_;
  std::shared_ptr<io::TensorMapSource> quantized_;  // fake-quantized weights
  std::vector<QuantizedLayer> layers_;
  std::map<std::string, quant::QParams> weight_qparams_;
  std::map<std::string, quant::QuantSpec> weight_specs_;  // by tensor name
  bool quantize_on_load_ = false;
  config::QuantConfig quant_config_;
};

}  // namespace quantd::exporter::testing

#endif  // QUANTD_WORKER_EXPORT_TESTING_IN_MEMORY_QUANTIZED_MODEL_H_
