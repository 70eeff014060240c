// ExportModel: the one entry point the pipeline calls to write a quantized
// model in an export format (HF fake-quantized, HF quark, GGUF, ONNX QDQ).
// It checks the format can express the model's specs (export_support.h),
// then dispatches to the format's exporter with the options that apply to
// it. Every export is atomic (artifact.h): written under a staging name and
// renamed into place, FAILED_PRECONDITION (OUTPUT_EXISTS) for an existing
// output unless overwrite is set; the Artifact lists every file with its
// size and sha256.
#ifndef QUANTD_WORKER_EXPORT_EXPORTER_H_
#define QUANTD_WORKER_EXPORT_EXPORTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/gguf/gguf_imatrix.h"
#include "worker/export/gguf/gguf_recipe_weights.h"
#include "worker/export/hf/hf_fake_quant.h"
#include "worker/export/quantized_model.h"
#include "worker/export/serving_target.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::exporter {

// "hf_fake_quantized", "hf_quark", "gguf", "onnx_qdq" or "compressed_tensors"
// (ExportFormatName's spelling); INVALID_ARGUMENT listing them for anything
// else.
StatusOr<ExportFormat> ParseExportFormat(std::string_view name);

struct ExportOptions {
  std::string output_dir;  // the artifact directory
  bool overwrite = false;
  // Who writes the output and the directory it must stay under (artifact.h).
  OutputOwner output_owner;
  // kVllm: FAILED_PRECONDITION (reason NOT_SERVABLE) instead of an export
  // that vLLM cannot serve (serving_target.h). quantd refuses such a job at
  // CreateJob; this holds for a model it could not read there.
  ServingTarget target = ServingTarget::kAny;

  // hf_quark, compressed_tensors: tensor bytes per safetensors shard (0: one
  // model.safetensors).
  // hf_fake_quantized keeps the input's names, dtypes and shard layout.
  uint64_t max_shard_bytes = uint64_t{5} << 30;
  // hf_quark, compressed_tensors: lower bound of the exported KV-cache scales.
  double min_kv_scale = 0.0;

  // gguf: the type of the quantized 2-D weights; unset picks the one that
  // keeps the job's codes (DefaultGgufWeightType).
  std::optional<gguf::GgmlType> gguf_weight_type;
  // gguf: quantized weights whose rows are not whole 32-element blocks.
  gguf::GgmlType gguf_fallback_type = gguf::GgmlType::kF16;
  // gguf: 2-D weights the job left in float: F32 (exact), F16 or BF16.
  gguf::GgmlType gguf_float_type = gguf::GgmlType::kF32;
  // gguf: general.name; empty: the model directory's name.
  std::string model_name;
  // gguf: the llama.cpp recipe the job's weights went through (a job with
  // spec.export.gguf_type); its blocks are written as they are.
  std::shared_ptr<const gguf::GgufRecipeWeights> gguf_recipe;
  // gguf with a recipe that calibrated: the imatrix file's metadata.
  gguf::ImatrixInfo gguf_imatrix_info;

  // onnx_qdq: rotary tables cover [0, max_sequence_length); 0 means
  // min(max_position_embeddings, 8192).
  int64_t onnx_max_sequence_length = 0;
  // onnx_qdq: above this many initializer bytes they go to external data.
  int64_t onnx_external_data_above_bytes = int64_t{1} << 30;
};

struct ExportResult {
  Artifact artifact;
  // What the artifact does not hold exactly as the job quantized it (GGUF
  // weights requantized or written in a fallback type), one line each, for
  // the job's events. Empty for the other formats.
  std::vector<std::string> notes;
  // What was written how, for the job's INFO events: for gguf, which
  // tensors went to which type (GgufExportResult::tensor_types).
  std::vector<std::string> info;
};

// INVALID_ARGUMENT (EXPORT_FORMAT_UNSUPPORTED) naming the format, the layer
// and the reason when the format cannot express a spec; FAILED_PRECONDITION
// (NOT_SERVABLE) for the target's refusals; the exporters' own
// errors otherwise (UNIMPLEMENTED for an architecture a format does not map,
// FAILED_PRECONDITION for an existing output). Nothing is left at
// output_dir on failure. `progress` is called with (done, total) steps.
StatusOr<ExportResult> ExportModel(const QuantizedModel& model, ExportFormat format,
                                   const ExportOptions& options,
                                   const ExportProgress& progress = nullptr);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_EXPORTER_H_
