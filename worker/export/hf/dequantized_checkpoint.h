// A real-quantized Hugging Face checkpoint (config.json with a
// quantization_config, safetensors holding codes and scales) seen as a
// QuantizedModel: each quantized Linear's weight is decoded on demand, its
// stored scale / zero point are the exact weight parameters
// (WeightQParams), stored static activation scales become the activation
// quantizers' parameters, and original() presents the dequantized
// checkpoint under Hugging Face names with the parameter tensors hidden.
//
// The formats differ only in their config and tensor layouts; each is a
// subclass (hf_quark_import.h: Quark's real_quantized;
// compressed_tensors/ct_import.h: compressed-tensors). quantized_checkpoint.h
// picks one from config.json.
#ifndef QUANTD_WORKER_EXPORT_HF_DEQUANTIZED_CHECKPOINT_H_
#define QUANTD_WORKER_EXPORT_HF_DEQUANTIZED_CHECKPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/export/hf/quark_tensors.h"
#include "worker/export/quantized_model.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/model_config.h"

namespace quantd::exporter {

class DequantizedCheckpoint : public QuantizedModel {
 public:
  DequantizedCheckpoint();
  ~DequantizedCheckpoint() override;

  const std::string& model_dir() const override { return dir_; }
  const models::ModelConfig& config() const override { return config_; }
  const io::TensorSource& original() const override { return *source_; }
  StatusOr<at::Tensor> Load(const std::string& name) const override {
    return LoadTensor(name, at::kFloat);
  }
  const std::vector<QuantizedLayer>& layers() const override { return layers_; }
  const QuantizedLayer* FindLayer(const std::string& module) const override;
  StatusOr<quant::QParams> WeightQParams(const std::string& module) const override;
  const config::QuantConfig& quant_config() const override { return quant_config_; }

  // What original() serves: every stored tensor except the quantization
  // parameters, quantized weights as float [out, in] in the model's dtype.
  std::vector<std::string> Names() const;
  const io::TensorInfo* Find(const std::string& name) const;
  StatusOr<at::Tensor> LoadTensor(const std::string& name, at::ScalarType dtype) const;

 protected:
  // Reads dir/config.json (the model config and its quantization_config,
  // which must name `quant_method`) and opens the safetensors. NOT_FOUND
  // when files are missing; FAILED_PRECONDITION for another quant_method.
  StatusOr<nlohmann::json> OpenDir(const std::string& dir, const std::string& quant_method);

  // A quantized layer; `stored_weight` when its weight is stored quantized
  // (the weight is then [info.out_features, info.in_features]).
  void AddLayer(QuantizedLayer layer, const models::LinearLayerInfo& info, bool stored_weight);

  // After every AddLayer: the tensor list, without those `is_parameter` names.
  void IndexTensors(const std::function<bool(const std::string&)>& is_parameter);

  // The weight's codes and exact parameters, `spec` its weight spec and
  // `shape` [out, in].
  virtual StatusOr<quant::QuantizedTensor> DecodeWeight(
      const std::string& module, const quant::QuantSpec& spec,
      const std::vector<int64_t>& shape) const = 0;
  // The float32 weight; Dequantize(DecodeWeight) unless a format maps its
  // columns onto groups itself.
  virtual StatusOr<at::Tensor> DequantizeWeight(const std::string& module,
                                                const quant::QuantSpec& spec,
                                                const std::vector<int64_t>& shape) const;

  // The tensor as stored (FP8 as bytes); an undefined one when absent.
  StatusOr<StoredTensor> Stored(const std::string& name) const;

  // A static per-tensor activation quantizer read from `scale_name` (and
  // `zero_point_name` for integers; zero when absent). A dynamic spec needs
  // no tensor. `zero_point_offset` is added to the stored zero point (a
  // format that stores unsigned zero points shifted into the signed range).
  StatusOr<std::optional<ActivationQuantizer>> StaticActivation(
      const std::string& what, const std::optional<quant::QuantSpec>& spec,
      const std::string& scale_name, const std::string& zero_point_name,
      int64_t zero_point_offset = 0) const;

  const io::SafetensorsSource& stored() const { return *stored_; }

  std::string dir_;
  models::ModelConfig config_;
  config::QuantConfig quant_config_;

 private:
  class Source;

  std::unique_ptr<io::SafetensorsSource> stored_;
  std::unique_ptr<io::TensorSource> source_;
  std::vector<QuantizedLayer> layers_;
  std::map<std::string, std::vector<int64_t>> weight_shapes_;  // module -> [out, in]
  std::map<std::string, io::TensorInfo> infos_;
};

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_DEQUANTIZED_CHECKPOINT_H_
