// Hugging Face export in the reference toolkit's "quark" format, the one vLLM
// and transformers load with quant_method "quark".
//
// config.json carries quantization_config = the job's reference JSON plus
// "export": {weight_format "real_quantized", pack_method "reorder",
// kv_cache_group, min_kv_scale}, written as the reference writes an export
// and vLLM's Quark loader reads it: the KV-cache globs also in
// layer_quant_config, and `exclude` naming each float Linear exactly
// (tests/peers/vllm_quark_check.py checks it). Each quantized Linear stores its
// real-quantized weight with weight_scale / weight_zero_point in the
// reference's layouts (quark_tensors.h); static activation quantizers add
// input_scale / output_scale (and *_zero_point for asymmetric integers). The
// FP8 KV cache is the k/v projections' output_scale, which vLLM's quark
// loader maps to attn.k_scale / attn.v_scale; kv_cache_group names them.
// Every other tensor is written as the input has it. The tokenizer and other
// small files are copied. The write is atomic (artifact.h).
#ifndef QUANTD_WORKER_EXPORT_HF_HF_QUARK_H_
#define QUANTD_WORKER_EXPORT_HF_HF_QUARK_H_

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/hf/hf_fake_quant.h"
#include "worker/export/quantized_model.h"

namespace quantd::exporter {

struct HfQuarkExportOptions {
  std::string output_dir;  // final artifact directory
  bool overwrite = false;
  // Who writes the output and the directory it must stay under (artifact.h).
  OutputOwner output_owner;
  // Tensor bytes per safetensors shard; 0 writes one model.safetensors.
  uint64_t max_shard_bytes = uint64_t{5} << 30;
  // Lower bound of the exported KV-cache scales (the reference's min_kv_scale).
  double min_kv_scale = 0.0;
};

// FAILED_PRECONDITION (OUTPUT_EXISTS) when the output exists and overwrite is
// false; INVALID_ARGUMENT naming the layer for a spec the format cannot
// express (export_support.h: e.g. int2 weights, a quantized bias, a static
// per-channel activation quantizer); UNIMPLEMENTED for a quantized GPT-2
// Conv1D weight; errors of `model` pass through. Nothing is left at
// output_dir on failure.
StatusOr<Artifact> ExportHfQuark(const QuantizedModel& model, const HfQuarkExportOptions& options,
                                 const ExportProgress& progress = nullptr);

// The HF fake-quantized export of a QuantizedModel: every tensor's value
// after quantization under the input's names, dtypes and shard layout.
StatusOr<Artifact> ExportHfFakeQuantized(const QuantizedModel& model,
                                         const HfFakeQuantExportOptions& options,
                                         const ExportProgress& progress = nullptr);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_HF_QUARK_H_
