// Import of a Hugging Face directory in the reference toolkit's quark format
// (real_quantized, pack_method "reorder"): quantd's own hf_quark export or
// the reference toolkit's.
//
// The directory becomes a QuantizedModel: its config.json's
// quantization_config is resolved per Linear layer, each quantized weight is
// unpacked and dequantized on demand (Load), its stored scale / zero point
// are the exact weight parameters (WeightQParams), and input_scale /
// output_scale become the static activation quantizers' parameters. So the
// engine evaluates it like any quantized model (quantized_model_runner.h),
// and every exporter can write it in another format. original() presents the
// dequantized checkpoint under Hugging Face names (the quark tensors
// *_scale / *_zero_point are hidden).
#ifndef QUANTD_WORKER_EXPORT_HF_HF_QUARK_IMPORT_H_
#define QUANTD_WORKER_EXPORT_HF_HF_QUARK_IMPORT_H_

#include <memory>
#include <string>

#include "worker/common/status.h"
#include "worker/export/quantized_model.h"

namespace quantd::exporter {

// `dir` holds config.json (with quantization_config) and the safetensors
// files. NOT_FOUND when they are missing; FAILED_PRECONDITION when
// config.json has no quark quantization_config or its export section is not
// real_quantized / reorder; UNIMPLEMENTED for quantized biases or specs
// without a quark layout; DATA_LOSS naming the tensor when a stored tensor
// does not match its spec (dtype, packed shape, missing scale).
StatusOr<std::unique_ptr<QuantizedModel>> OpenQuarkModel(const std::string& dir);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_HF_QUARK_IMPORT_H_
