// A job whose model is a real-quantized checkpoint (quantd's own hf-quark or
// compressed-tensors export, or the reference toolkit's) starts from the
// checkpoint's dequantized weights. Where the job quantizes a tensor on the
// very grid the checkpoint stores it on, the job keeps the stored parameters
// (weight scale / zero point and group index, static input and KV-cache
// scales) instead of fitting new ones from the dequantized values: the
// codes then come back exactly, and exporting to the same format writes
// the same artifact. A tensor the job quantizes differently, and every
// tensor of a job whose algorithms or transform change the weights, is
// quantized afresh from the dequantized values.
#ifndef QUANTD_WORKER_PIPELINE_STORED_QUANTIZATION_H_
#define QUANTD_WORKER_PIPELINE_STORED_QUANTIZATION_H_

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/quantized_model.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::pipeline {

// The stored parameters a layer keeps, in the job's specs.
struct StoredLayerParams {
  std::optional<quant::QParams> weight;
  at::Tensor weight_group_index;         // int32 [in] when the stored groups are permuted columns
  std::optional<quant::QParams> input;   // static input quantizer
  std::optional<quant::QParams> output;  // static output quantizer (the KV cache)
};

struct StoredQuantization {
  std::map<std::string, StoredLayerParams> layers;
  // Stored quantized weights the job quantizes afresh, with the reason.
  std::vector<std::string> requantized;
  // Stored quantized weights the job leaves in float: their dequantized values.
  std::vector<std::string> left_float;

  const StoredLayerParams* Find(const std::string& layer) const {
    auto it = layers.find(layer);
    return it == layers.end() ? nullptr : &it->second;
  }
};

// `qp` (parameters of a tensor quantized with `stored`) expressed in
// `plan`, when both describe the same grid of values: equal specs up to
// calibration-only fields (observer, percentile) and defaulted axes, or
// intN and uintN of the same width with the zero point shifted by 2^(N-1)
// (the signed and unsigned code sets of compressed-tensors and Quark).
// nullopt otherwise, or when a symmetric `plan` cannot hold the zero point.
std::optional<quant::QParams> SameGridQParams(const quant::QuantSpec& stored,
                                              const quant::QParams& qp,
                                              const quant::QuantSpec& plan);

struct StoredMatchOptions {
  // Algorithms or a model transform change the weights before rounding:
  // nothing stored is kept.
  bool weights_change = false;
  // A format other than compressed-tensors and hf reads weight groups as
  // contiguous columns, so permuted stored groups are not kept.
  bool contiguous_groups_only = false;
};

// Which stored parameters the job keeps, layer by layer.
StatusOr<StoredQuantization> MatchStoredQuantization(const exporter::QuantizedModel& stored,
                                                     const std::map<std::string, LayerPlan>& plans,
                                                     const StoredMatchOptions& options);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_STORED_QUANTIZATION_H_
