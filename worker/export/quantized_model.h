// QuantizedModel: the quantized model as every exporter sees it.
//
// The pipeline quantizes block by block into a scratch store and then hands
// exporters this read-only view: the checkpoint it started from, each
// tensor's value after quantization, and for every quantized layer its
// specs and exact parameters (weight scale / zero point as used, calibrated
// static activation scales, unified KV-cache scales). Real-quantized codes
// are RealQuantize(value, spec, params): exact, because the values are the
// fake-quantized ones. Tensors are loaded on demand, one at a time, so an
// exporter never holds the whole model.
#ifndef QUANTD_WORKER_EXPORT_QUANTIZED_MODEL_H_
#define QUANTD_WORKER_EXPORT_QUANTIZED_MODEL_H_

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/export/export_support.h"
#include "worker/io/tensor_source.h"
#include "worker/models/model_config.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::exporter {

// An activation quantizer of a layer: dynamic (parameters at every forward)
// or static with its calibrated parameters.
struct ActivationQuantizer {
  quant::QuantSpec spec;
  std::optional<quant::QParams> static_qparams;  // set when !spec.is_dynamic
};

// How one module (a Linear, by module name such as
// "model.layers.0.self_attn.q_proj") was quantized.
struct QuantizedLayer {
  std::string name;
  std::string type = "Linear";
  std::optional<quant::QuantSpec> weight;
  std::optional<quant::QuantSpec> bias;
  std::optional<ActivationQuantizer> input;
  std::optional<ActivationQuantizer> output;  // incl. the FP8 KV cache on k/v projections
};

class QuantizedModel {
 public:
  virtual ~QuantizedModel() = default;

  // The Hugging Face directory the job started from (config.json, tokenizer).
  virtual const std::string& model_dir() const = 0;
  virtual const models::ModelConfig& config() const = 0;
  // The original checkpoint (names, dtypes, shard layout): every tensor the
  // export writes. A job may add one: a rotated model whose head was tied to
  // its embedding gets its own lm_head.weight, and config() then says
  // tie_word_embeddings false.
  virtual const io::TensorSource& original() const = 0;
  // A tensor's value after quantization (fake-quantized for quantized
  // weights), float32, same name and shape as in original().
  virtual StatusOr<at::Tensor> Load(const std::string& tensor_name) const = 0;
  // Every quantized layer, in model order.
  virtual const std::vector<QuantizedLayer>& layers() const = 0;
  // nullptr for a layer left in float.
  virtual const QuantizedLayer* FindLayer(const std::string& module_name) const = 0;
  // The exact weight parameters used for `module_name` (GPTQ fits them while
  // it runs, so they cannot be recomputed from the values).
  virtual StatusOr<quant::QParams> WeightQParams(const std::string& module_name) const = 0;
  // GPTQ's column-to-group map where act_order without static_groups made
  // each weight group a run of permuted columns: int32 [in], the group of
  // each input column, which indexes WeightQParams' [out, G]. Undefined
  // when the groups are contiguous (column c in group c / group_size).
  virtual StatusOr<at::Tensor> WeightGroupIndex(const std::string& module_name) const {
    (void)module_name;
    return at::Tensor();
  }
  // A llama.cpp recipe job that calibrated: the sum of the squared
  // activations each input column of `module_name` saw over `count`
  // calibration tokens (one entry of llama.cpp's imatrix). Undefined sum2
  // when the job gathered none for it.
  struct ImportanceSums {
    at::Tensor sum2;  // float32 [in_features]
    float count = 0;
  };
  virtual StatusOr<ImportanceSums> WeightImportance(const std::string& module_name) const {
    (void)module_name;
    return ImportanceSums{};
  }
  // A llama.cpp recipe job's blocks of a weight an algorithm (GPTQ)
  // quantized itself: uint8 [out, row bytes] in the layout the module's
  // weight has as a GGUF tensor before any row permutation; undefined when
  // the recipe's quantizer is to encode the weight.
  virtual StatusOr<at::Tensor> GgmlBlocks(const std::string& module_name) const {
    (void)module_name;
    return at::Tensor();
  }
  // The job's resolved config, which HF exports record as the reference
  // toolkit's quantization_config.
  virtual const config::QuantConfig& quant_config() const = 0;
};

// Every quantized layer's specs, for CheckExportSupport.
inline std::vector<ExportLayerSpecs> ExportLayerSpecsOf(const QuantizedModel& model) {
  std::vector<ExportLayerSpecs> out;
  for (const QuantizedLayer& l : model.layers()) {
    ExportLayerSpecs e{l.name, l.weight, l.bias, std::nullopt, std::nullopt};
    if (l.input) e.input = l.input->spec;
    if (l.output) e.output = l.output->spec;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_QUANTIZED_MODEL_H_
