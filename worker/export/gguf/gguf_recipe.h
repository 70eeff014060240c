// llama.cpp's file types ("recipes": Q4_K_M, Q5_K_S, ...) and the per-tensor
// type each gives, as llama-quantize chooses them.
//
// A file type names a default block type and rules that move some tensors
// to more bits: the output head (and a tied token embedding) to Q6_K, in
// the Q4/Q5 _M recipes attn_v and ffn_down of the layers use_more_bits picks
// (the first and last eighth and every third layer between) to Q6_K, and in
// the 2- and 3-bit recipes attn_v, attn_output and ffn_down to Q3_K..Q5_K.
// A tensor whose rows are not whole blocks of the chosen type falls back:
// Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and to
// F16 when the rows are not whole blocks of 32 either; the 32-element types have no fallback, so a
// model with such rows cannot take them (llama.cpp refuses the same file).
//
// The rules follow llama.cpp's src/llama-quant.cpp (llama_tensor_get_type_impl,
// tensor_type_fallback, tensor_allows_quantization, llama_ftype_get_default_type)
// as of ggml-org/llama.cpp 007dbbf3 and the snapshot node-llama-cpp 3.21.1
// bundles; docs/export.md lists them. Torch-free.
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_RECIPE_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_RECIPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {

// The llama_ftype values quantd writes (general.file_type).
enum class GgufFileType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kBF16 = 32,
};

// "Q4_K_M", "F16", ... (llama-quantize's spelling); case-insensitive.
std::optional<GgufFileType> GgufFileTypeFromName(std::string_view name);
std::string_view GgufFileTypeName(GgufFileType t);
// "F32, F16, BF16, Q8_0, ..." for error messages.
std::string AllGgufFileTypeNames();
// The block type most tensors get (llama_ftype_get_default_type).
GgmlType DefaultTensorType(GgufFileType t);

// What the rules read of the model.
struct RecipeModel {
  std::string arch;  // llama.cpp's: "llama", "qwen2", "qwen3", "gpt2"
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_expert = 0;
  // The file is quantized with an importance matrix (llama.cpp's
  // has_imatrix): Q4_0 / Q5_0 files then give ffn_down of the first eighth
  // of the layers Q4_1 / Q5_1.
  bool has_imatrix = false;
};

// One tensor as llama.cpp sees it: its GGUF name, its row width ne[0] and
// its number of dimensions.
struct RecipeTensor {
  std::string name;
  int64_t ne0 = 0;
  int n_dims = 0;
};

struct RecipeChoice {
  // nullopt: the recipe leaves the tensor as it is (1-D tensors, norms,
  // position embeddings).
  std::optional<GgmlType> type;
  // The type the rules chose before the row-width fallback, when it differs.
  std::optional<GgmlType> wanted;
};

// The choice for every tensor, in the order given. FAILED_PRECONDITION
// naming every tensor whose rows fit neither the chosen type nor a fallback.
StatusOr<std::vector<RecipeChoice>> ChooseRecipeTypes(GgufFileType ftype, const RecipeModel& model,
                                                      const std::vector<RecipeTensor>& tensors);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_RECIPE_H_
