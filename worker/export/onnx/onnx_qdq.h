// ONNX QDQ export of a quantized causal LM as a decoder with a key/value
// cache, built natively (onnx_proto.h writes the protobuf), in the layout
// Optimum and onnxruntime-genai use:
//
//   inputs   input_ids       int64 [batch, sequence_length]
//            attention_mask  int64 [batch, total_sequence_length] (1 = token, 0 = padding)
//            position_ids    int64 [batch, sequence_length]
//            past_key_values.N.key / .value
//                            float32 [batch, kv_heads, past_sequence_length, head_dim]
//   outputs  logits          float32 [batch, sequence_length, vocab]
//            present.N.key / .value
//                            float32 [batch, kv_heads, total_sequence_length, head_dim]
//
// total = past + sequence; the first call passes an empty cache (past 0).
// Keys are stored after RoPE. A key is hidden from a query when it lies
// after it or where attention_mask is 0, so left-padded batches work.
// Beside model.onnx: genai_config.json and the model's tokenizer and side
// files (hf_files.h).
//
// Llama-family decoders (Llama, Mistral without a binding sliding window,
// Qwen2 with qkv bias) with SiLU MLPs. Every quantized Linear weight is an
// initializer of its codes, transposed to [in, out] for MatMul, with a
// DequantizeLinear node (its scale and zero point as initializers:
// per_tensor; per_channel as axis 1; per_group as axis 0 with block_size);
// 4-bit codes in blocks of a power of two >= 16 along the inputs are
// onnxruntime's MatMulNBits (com.microsoft) instead, with float32
// arithmetic; float16 / bfloat16 weights are initializers of that type with
// a Cast. Static per-tensor activation quantizers (inputs, outputs, the KV
// cache as the k/v projections' outputs) become QuantizeLinear +
// DequantizeLinear pairs with the calibrated scale and zero point, FP8 ones
// x / scale -> Cast -> Cast -> * scale. Why those two forms:
// docs/export.md, "ONNX: a decoder with a cache". Rotary tables (computed in
// float64 like the engine) are initializers gathered at position_ids.
//
// The opset is the lowest that expresses the model: 13 for int8 / uint8,
// 19 when FP8 appears, 21 for int4 / uint4 or per-group (blocked)
// DequantizeLinear (IR versions 7, 9, 10).
#ifndef QUANTD_WORKER_EXPORT_ONNX_ONNX_QDQ_H_
#define QUANTD_WORKER_EXPORT_ONNX_ONNX_QDQ_H_

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/hf/hf_fake_quant.h"
#include "worker/export/quantized_model.h"

namespace quantd::exporter {

struct OnnxQdqExportOptions {
  std::string output_dir;
  bool overwrite = false;
  // Who writes the output and the directory it must stay under (artifact.h).
  OutputOwner output_owner;
  std::string file_name = "model.onnx";
  // Rotary tables cover positions [0, max_sequence_length); 0 means
  // min(max_position_embeddings, 8192).
  int64_t max_sequence_length = 0;
  // Above this many initializer bytes, initializers are written to
  // "<file_name>.data" (ONNX external data), as protobuf caps a model at 2 GB.
  int64_t external_data_above_bytes = int64_t{1} << 30;
};

struct OnnxQdqExportResult {
  Artifact artifact;
  int64_t opset = 0;
  int64_t ir_version = 0;
};

// INVALID_ARGUMENT naming the layer for a scheme ONNX QDQ cannot express
// (export_support.h: MX formats, dynamic or non-per-tensor activation
// quantizers, rounding other than half-even on activations); UNIMPLEMENTED for an
// architecture outside the Llama family, a non-SiLU MLP or a sliding window
// shorter than the sequence; FAILED_PRECONDITION (OUTPUT_EXISTS) for an
// existing output without overwrite.
StatusOr<OnnxQdqExportResult> ExportOnnxQdq(const QuantizedModel& model,
                                            const OnnxQdqExportOptions& options,
                                            const ExportProgress& progress = nullptr);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_ONNX_ONNX_QDQ_H_
