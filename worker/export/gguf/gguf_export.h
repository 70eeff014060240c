// WriteGgufFromHf: a Hugging Face checkpoint (config.json + weights) as a
// GGUF file that stock llama.cpp loads with no other files.
//
// Hyperparameters become llama.cpp's "<arch>.*" keys, tensor names follow
// llama.cpp's convention (hf_mapping.h), Llama q/k rows are permuted to
// llama.cpp's interleaved RoPE order, GPT-2 Conv1D weights are transposed,
// 1-D tensors (norms, biases) stay F32 as llama.cpp's converter writes them,
// and matrices use the requested type. Tokenizer metadata (llama.cpp's
// tokenizer.ggml.* keys) comes from gguf_tokenizer.h's TokenizerGgufMetadata.
// Architectures: LlamaForCausalLM / MistralForCausalLM (llama),
// Qwen2ForCausalLM (qwen2), Qwen3ForCausalLM (qwen3), GPT2LMHeadModel (gpt2).
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_EXPORT_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_EXPORT_H_

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/gguf/gguf_recipe.h"
#include "worker/io/gguf/ggml_types.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/tensor_source.h"

namespace quantd::gguf {

// Applies a tensor's change to llama.cpp's layout (the q/k RoPE row
// permutation, GPT-2's transposition) to any tensor whose leading axis runs
// along the weight's rows, e.g. integer codes or per-row scales; returns a
// contiguous tensor.
using GgufLayoutFn = std::function<StatusOr<at::Tensor>(const at::Tensor& hf_layout)>;

// How one tensor is written when the default (weight_type for matrices, F32
// for vectors, encoded from its float values with QuantizeRow) is not wanted.
struct GgufTensorEncoding {
  GgmlType type = GgmlType::kF32;
  // Fills `bytes` (GgmlRowBytes(type, numel)) from the tensor. Null: the
  // float values through QuantizeRow(type).
  std::function<Status(const GgufLayoutFn& to_gguf_layout, std::vector<uint8_t>* bytes)> encode;
};

struct GgufExportOptions {
  // Type of 2-D weights: F32, F16, BF16, Q8_0, Q4_0 or Q4_1 (quantized from
  // the float values with ggml's reference quantizers). Also sets
  // general.file_type.
  GgmlType weight_type = GgmlType::kF16;
  // Per-tensor override, called with each tensor's HF name and HF shape;
  // nullopt keeps the default above.
  std::function<StatusOr<std::optional<GgufTensorEncoding>>(const std::string& hf_name,
                                                            const std::vector<int64_t>& hf_shape)>
      tensor_encoding;
  // general.file_type (a llama_ftype); nullopt: the one weight_type implies.
  std::optional<uint32_t> file_type;
  std::string model_name = "quantd";
  uint32_t alignment = 32;
  // Extra metadata, e.g. TokenizerGgufMetadata(); written after the model keys.
  std::vector<std::pair<std::string, GgufValue>> extra_metadata;
};

// How llama.cpp's recipe writes one checkpoint tensor (gguf_recipe.h).
struct RecipeTensorPlan {
  std::string gguf_name;
  GgmlType type = GgmlType::kF32;
  // The type the rules chose before the row-width fallback, when it differs.
  std::optional<GgmlType> wanted;
  // GPT-2's Conv1D weights: rows of the GGUF tensor are the checkpoint's columns.
  bool transposed = false;
};

// The type `file_type` gives each tensor of the checkpoint, by its Hugging
// Face name; tensors the recipe leaves as they are (norms, biases, position
// embeddings) are absent. Errors as WriteGgufFromHf's, and ChooseRecipeTypes'
// FAILED_PRECONDITION for rows no type fits.
// `with_importance`: the file will be quantized with an importance matrix.
StatusOr<std::map<std::string, RecipeTensorPlan>> PlanGgufRecipe(const std::string& config_json,
                                                                 const io::TensorSource& weights,
                                                                 GgufFileType file_type,
                                                                 bool with_importance = false);

// Writes `path` atomically. INVALID_ARGUMENT for a config.json missing a
// hyperparameter (named) or a tensor with no llama.cpp name; UNIMPLEMENTED
// for an architecture not listed above; errors from `weights` pass through.
Status WriteGgufFromHf(const std::string& config_json, const io::TensorSource& weights,
                       const GgufExportOptions& options, const std::string& path);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_EXPORT_H_
