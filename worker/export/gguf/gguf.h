// GGUF export of a quantized model for llama.cpp (gguf_export.h writes the
// file: llama.cpp's metadata, tokenizer, tensor names and q/k RoPE layout).
//
// The job's quantized 2-D weights are written as `weight_type`:
//  - F32 / F16: their values after quantization;
//  - Q8_0 / Q4_0 / Q4_1: when the job's own codes fit the block format, they
//    are written as they are, with the block's d (and m) from the job's
//    scale (and zero point) rounded to fp16:
//      Q8_0  any integer spec whose q - zp fits int8 (symmetric, or <= 7 bits),
//      Q4_0  a symmetric integer spec of <= 4 bits (x = (q - zp) * s),
//      Q4_1  an integer spec of <= 4 bits, symmetric or not
//            (nibble = q - qmin, d = s, m = (qmin - zp) * s),
//    per_tensor, per_channel (output axis) or per_group along the input axis
//    with a group size that is a multiple of 32. So a job of int4 sym
//    per_group(32) exports to Q4_0, uint4 asym per_group(32) with fp16 scales
//    to Q4_1, int8 sym per_group(32) to Q8_0, with the job's codes;
//  - otherwise the values are requantized with ggml's reference quantizer,
//    and a note says so.
// A weight whose rows are not whole 32-element blocks (e.g. an FFN width of
// 172) is written as `fallback_type`, and a note says so. 2-D weights the job
// left in float (and a quantized embedding, as its values) are written as
// `float_type`: F32 by default, exact; F16 or BF16 halve them, as llama.cpp's
// converter writes them. Norms and biases stay F32. `tensor_types` says
// which tensors were written in which type.
// The write is atomic (artifact.h): `output_dir` receives `file_name`.
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_H_

#include <map>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/gguf/gguf_imatrix.h"
#include "worker/export/gguf/gguf_recipe_weights.h"
#include "worker/export/hf/hf_fake_quant.h"
#include "worker/export/quantized_model.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::exporter {

struct GgufModelExportOptions {
  std::string output_dir;
  bool overwrite = false;
  // Who writes the output and the directory it must stay under (artifact.h).
  OutputOwner output_owner;
  std::string file_name = "model.gguf";
  // general.name; empty: the model directory's name.
  std::string model_name;
  // F32, F16, Q8_0, Q4_0 or Q4_1.
  gguf::GgmlType weight_type = gguf::GgmlType::kQ8_0;
  // Quantized weights whose rows are not whole blocks: F32 or F16.
  gguf::GgmlType fallback_type = gguf::GgmlType::kF16;
  // 2-D weights the job did not quantize (embeddings, excluded layers): F32,
  // F16 or BF16.
  gguf::GgmlType float_type = gguf::GgmlType::kF32;
  // A job that ran a llama.cpp recipe (gguf_recipe_weights.h): every tensor
  // the recipe quantizes is written as its blocks, general.file_type is the
  // recipe's, and weight_type and fallback_type do not apply.
  std::shared_ptr<const gguf::GgufRecipeWeights> recipe;
  // With a recipe whose weights carry importance sums
  // (QuantizedModel::WeightImportance): they quantize those weights, and
  // llama.cpp's imatrix file of them (gguf_imatrix.h) is written beside the
  // GGUF as kImatrixFileName, with this metadata.
  gguf::ImatrixInfo imatrix_info;
};

inline constexpr char kImatrixFileName[] = "imatrix.gguf";

struct GgufExportResult {
  Artifact artifact;
  // What the file does not hold exactly as the job quantized it, one line
  // per kind and type (for the job's events), e.g. "GGUF Q4_0: 5 weights
  // requantized from the job's values (mxfp4 block 32 (even) is not a Q4_0
  // code set): model.layers.0.mlp.gate_proj, ...".
  std::vector<std::string> notes;
  // Weights written with the job's own codes.
  int exact_code_tensors = 0;
  // Which tensors went to which type, one line per type (for the job's
  // events), e.g. "gguf F32: 1 float weight (model.embed_tokens.weight), 11
  // norms and biases".
  std::vector<std::string> tensor_types;
  // The type of every tensor written, by its Hugging Face name.
  std::map<std::string, gguf::GgmlType> type_of;
};

// INVALID_ARGUMENT for a weight_type / fallback_type / float_type outside
// the lists above, or a scheme GGUF cannot express (export_support.h: MX
// weights, activation or KV-cache quantizers, quantized biases); UNIMPLEMENTED for an architecture
// GGUF export does not map (gguf_export.h) or a tokenizer it cannot embed; FAILED_PRECONDITION
// (OUTPUT_EXISTS) for an existing output without overwrite.
StatusOr<GgufExportResult> ExportGguf(const QuantizedModel& model,
                                      const GgufModelExportOptions& options,
                                      const ExportProgress& progress = nullptr);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_H_
