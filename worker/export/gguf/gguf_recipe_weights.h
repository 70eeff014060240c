// GgufRecipeWeights: a checkpoint as llama.cpp's recipe (a llama_ftype such
// as Q4_K_M, gguf_recipe.h) quantizes it, what llama-quantize would make of
// the same float weights.
//
// As a TensorSource it serves every tensor the recipe quantizes as the
// decoded values of its blocks (so a job that evaluates these weights scores
// exactly what llama.cpp loads), the rest unchanged. Encode gives the blocks
// themselves for the GGUF export: both run ggml's reference quantizer on the
// same float32 weights, so they agree bit for bit. Blocks never span rows, so
// the row permutation llama.cpp's q/k layout applies does not change them;
// GPT-2's transposed weights are quantized along the GGUF rows.
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_RECIPE_WEIGHTS_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_RECIPE_WEIGHTS_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/gguf/gguf_export.h"
#include "worker/export/gguf/gguf_recipe.h"
#include "worker/io/tensor_source.h"

namespace quantd::gguf {

// An imatrix entry's weights as llama-quantize computes them from the file:
// each column's sum of squared activations divided by the token count, in
// float32. float32 [n].
at::Tensor ImportanceFromSums(const at::Tensor& sum2, float count);

class GgufRecipeWeights final : public io::TensorSource {
 public:
  // Plans the recipe over `base` (PlanGgufRecipe's errors: an architecture
  // GGUF does not map, rows no type of the recipe fits); `with_importance`
  // when the weights will be quantized with an importance matrix (it moves
  // some types, as in llama.cpp).
  static StatusOr<std::shared_ptr<GgufRecipeWeights>> Create(
      std::shared_ptr<const io::TensorSource> base, const std::string& config_json,
      GgufFileType file_type, bool with_importance = false);

  GgufFileType file_type() const { return file_type_; }
  // The recipe's plan of `hf_name`; nullptr for a tensor it leaves as it is.
  const RecipeTensorPlan* PlanOf(const std::string& hf_name) const;
  // The blocks of `hf_name` in llama.cpp's layout (`to_gguf` applied to the
  // float32 base weights); GgmlRowBytes(PlanOf(hf_name)->type, numel) bytes.
  // `importance`, when defined: float32 [row width], an importance matrix's
  // weight per column (QuantizeRows), as llama-quantize --imatrix uses it.
  Status Encode(const std::string& hf_name, const GgufLayoutFn& to_gguf,
                const at::Tensor& importance, std::vector<uint8_t>* bytes) const;
  // The decoded blocks of `hf_name` in the checkpoint's layout, quantized
  // with `importance` when it is defined (Load: without).
  StatusOr<at::Tensor> Decode(const std::string& hf_name, const at::Tensor& importance,
                              at::ScalarType dtype = at::kFloat) const;
  // One line per type, e.g. "Q4_K: 20 weights", for the job's events.
  std::vector<std::string> DescribeTypes() const;
  // One line per fallback llama.cpp's rule made, e.g. "Q5_0 for Q4_K: 15
  // weights whose rows are not whole blocks of 256 (blk.0.attn_q.weight,
  // ...)"; empty when every tensor got the type the rules chose.
  std::vector<std::string> DescribeFallbacks() const;

  std::vector<std::string> Names() const override { return base_->Names(); }
  const io::TensorInfo* Find(const std::string& name) const override { return base_->Find(name); }
  StatusOr<at::Tensor> Load(const std::string& name,
                            at::ScalarType dtype = at::kFloat) const override;
  std::map<std::string, std::string> Metadata() const override { return base_->Metadata(); }
  std::string Description() const override;

 private:
  GgufRecipeWeights(std::shared_ptr<const io::TensorSource> base, GgufFileType file_type,
                    std::map<std::string, RecipeTensorPlan> plan)
      : base_(std::move(base)), file_type_(file_type), plan_(std::move(plan)) {}

  std::shared_ptr<const io::TensorSource> base_;
  GgufFileType file_type_;
  std::map<std::string, RecipeTensorPlan> plan_;
};

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_RECIPE_WEIGHTS_H_
