// Hugging Face export in the compressed-tensors format, the one llm-compressor
// writes and vLLM loads natively (quant_method "compressed-tensors").
//
// config.json carries quantization_config (ct_config.h). Each quantized
// Linear "m" stores, as the library's compressors write them
// (vllm-project/compressed-tensors at ac8e2ba82f4e0d5eaa40069f8fc642738f124cd4:
// compressors/pack_quantized/base.py, compressors/naive_quantized/base.py,
// quantization/lifecycle/initialize.py) and vLLM's schemes allocate them
// (vllm/model_executor/layers/quantization/compressed_tensors/schemes/
// compressed_tensors_wNa16.py, _w8a8_int8.py, _w8a8_fp8.py, _w8a16_fp8.py):
//
//   pack-quantized (int4 / int8 weights alone: W4A16, W8A16)
//     m.weight_packed      I32 [out, in*bits/32]   (ct_packing.h)
//     m.weight_scale       F32 [out, groups] ([out, 1] per channel)
//     m.weight_shape       I64 [2] = {out, in}
//     m.weight_zero_point  I32 [out*bits/32, groups], asymmetric only
//   int-quantized (int8 weights with int8 inputs: W8A8)
//     m.weight I8 [out, in]; m.weight_scale F32 [1] or [out, 1]
//   float-quantized / naive-quantized (FP8 e4m3 weights with / without
//   FP8 inputs)
//     m.weight F8_E4M3 [out, in]; m.weight_scale F32 [1] or [out, 1]
//   static inputs: m.input_scale F32 [1] (+ m.input_zero_point I8 [1] for
//   asymmetric int8)
//   FP8 KV cache: <attention>.k_scale / .v_scale F32 [1] (the k / v
//   projections' output scales).
//
// Codes are signed: an unsigned quantd code set (uint4 / uint8) is shifted by
// 2^(bits-1) together with its zero point, which leaves (q - zp) * scale, and
// so every dequantized weight, unchanged. Scales are written in float32, the
// exact values quantd used. Every other tensor is written as the input has
// it; the tokenizer and other small files are copied; the write is atomic.
#ifndef QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_EXPORT_H_
#define QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_EXPORT_H_

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/hf/hf_fake_quant.h"
#include "worker/export/quantized_model.h"

namespace quantd::exporter {

struct CompressedTensorsExportOptions {
  std::string output_dir;  // final artifact directory
  bool overwrite = false;
  OutputOwner output_owner;
  // Tensor bytes per safetensors shard; 0 writes one model.safetensors.
  uint64_t max_shard_bytes = uint64_t{5} << 30;
  // Lower bound of the exported KV-cache scales.
  double min_kv_scale = 0.0;
};

// FAILED_PRECONDITION (OUTPUT_EXISTS) when the output exists and overwrite is
// false; INVALID_ARGUMENT (EXPORT_FORMAT_UNSUPPORTED) naming the layer for
// what vLLM's compressed_tensors loader cannot hold: a spec or combination
// CheckExportSupport refuses, Linears that vLLM fuses (q/k/v, gate/up) with
// different schemes, a packed weight whose input width (or, asymmetric, its
// output width) is not a multiple of 32/bits, a KV cache on only some k/v
// projections; UNIMPLEMENTED for a quantized GPT-2 Conv1D weight. Nothing
// is left at output_dir on failure.
StatusOr<Artifact> ExportCompressedTensors(const QuantizedModel& model,
                                           const CompressedTensorsExportOptions& options,
                                           const ExportProgress& progress = nullptr);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_EXPORT_H_
