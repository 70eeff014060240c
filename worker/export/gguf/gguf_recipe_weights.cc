#include "worker/export/gguf/gguf_recipe_weights.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>

namespace quantd::gguf {
namespace {

// ggml's quantizer over the rows of a contiguous float32 matrix, weighted by
// `importance` (one value per column) when it is defined. Rows are
// independent, so they are quantized in parallel (the bytes do not depend on
// the split).
Status QuantizeMatrix(GgmlType type, const at::Tensor& rows, const at::Tensor& importance,
                      std::vector<uint8_t>* bytes) {
  const int64_t width = rows.size(-1);
  const int64_t n_rows = rows.numel() / width;
  at::Tensor weights;
  if (importance.defined()) {
    weights = importance.to(at::kFloat).contiguous();
    if (weights.numel() != width)
      return InvalidArgumentError("importance of " + std::to_string(weights.numel()) +
                                  " columns for rows of " + std::to_string(width));
  }
  QD_ASSIGN_OR_RETURN(uint64_t row_bytes, GgmlRowBytes(type, width));
  bytes->resize(row_bytes * n_rows);
  const float* src = rows.data_ptr<float>();
  const float* imp = weights.defined() ? weights.data_ptr<float>() : nullptr;
  uint8_t* dst = bytes->data();
  std::atomic<bool> failed{false};
  // About 256 KiB of floats per task.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, width));
  at::parallel_for(0, n_rows, grain, [&](int64_t begin, int64_t end) {
    if (!QuantizeRows(type, src + begin * width, dst + begin * row_bytes, end - begin, width, imp)
             .ok())
      failed = true;
  });
  if (failed) return InternalError("quantizing rows of " + std::to_string(width) + " failed");
  return OkStatus();
}

}  // namespace

at::Tensor ImportanceFromSums(const at::Tensor& sum2, float count) {
  at::Tensor sums = sum2.to(at::kFloat).contiguous();
  at::Tensor out = at::empty_like(sums);
  const float* s = sums.data_ptr<float>();
  float* o = out.data_ptr<float>();
  // A float division per column, as llama-quantize's (no reciprocal).
  for (int64_t i = 0; i < sums.numel(); ++i) o[i] = s[i] / count;
  return out;
}

StatusOr<std::shared_ptr<GgufRecipeWeights>> GgufRecipeWeights::Create(
    std::shared_ptr<const io::TensorSource> base, const std::string& config_json,
    GgufFileType file_type, bool with_importance) {
  QD_ASSIGN_OR_RETURN(auto plan, PlanGgufRecipe(config_json, *base, file_type, with_importance));
  return std::shared_ptr<GgufRecipeWeights>(
      new GgufRecipeWeights(std::move(base), file_type, std::move(plan)));
}

const RecipeTensorPlan* GgufRecipeWeights::PlanOf(const std::string& hf_name) const {
  auto it = plan_.find(hf_name);
  return it == plan_.end() ? nullptr : &it->second;
}

Status GgufRecipeWeights::Encode(const std::string& hf_name, const GgufLayoutFn& to_gguf,
                                 const at::Tensor& importance, std::vector<uint8_t>* bytes) const {
  const RecipeTensorPlan* p = PlanOf(hf_name);
  if (p == nullptr) return InternalError(hf_name + " is not quantized by the GGUF recipe");
  QD_ASSIGN_OR_RETURN(at::Tensor t, base_->Load(hf_name, at::kFloat));
  QD_ASSIGN_OR_RETURN(t, to_gguf(t));
  return QuantizeMatrix(p->type, t, importance, bytes);
}

StatusOr<at::Tensor> GgufRecipeWeights::Load(const std::string& name, at::ScalarType dtype) const {
  if (PlanOf(name) == nullptr) return base_->Load(name, dtype);
  return Decode(name, at::Tensor(), dtype);
}

StatusOr<at::Tensor> GgufRecipeWeights::Decode(const std::string& name, const at::Tensor& importance,
                                               at::ScalarType dtype) const {
  const RecipeTensorPlan* p = PlanOf(name);
  if (p == nullptr) return InternalError(name + " is not quantized by the GGUF recipe");
  QD_ASSIGN_OR_RETURN(at::Tensor t, base_->Load(name, at::kFloat));
  try {
    at::Tensor rows = p->transposed ? t.t().contiguous() : t.contiguous();
    std::vector<uint8_t> bytes;
    Status quantized = QuantizeMatrix(p->type, rows, importance, &bytes);
    if (!quantized.ok()) return quantized.Prepend(name + ": ");
    at::Tensor decoded = at::empty(rows.sizes(), at::kFloat);
    QD_RETURN_IF_ERROR(
        DequantizeRow(p->type, bytes.data(), decoded.data_ptr<float>(), decoded.numel()));
    if (p->transposed) decoded = decoded.t().contiguous();
    return decoded.to(dtype);
  } catch (const c10::Error& e) {
    return InternalError(name + ": " + e.what_without_backtrace());
  }
}

std::string GgufRecipeWeights::Description() const {
  return base_->Description() + " as GGUF " + std::string(GgufFileTypeName(file_type_));
}

std::vector<std::string> GgufRecipeWeights::DescribeTypes() const {
  std::map<GgmlType, int> count;
  for (const auto& [name, p] : plan_) ++count[p.type];
  std::vector<std::string> lines;
  for (const auto& [type, n] : count)
    lines.push_back(std::string(GetGgmlTypeTraits(type).name) + ": " + std::to_string(n) +
                    (n == 1 ? " weight" : " weights"));
  return lines;
}

std::vector<std::string> GgufRecipeWeights::DescribeFallbacks() const {
  std::map<std::pair<GgmlType, GgmlType>, std::vector<std::string>> fallbacks;
  for (const auto& [name, p] : plan_)
    if (p.wanted) fallbacks[{*p.wanted, p.type}].push_back(p.gguf_name);
  std::vector<std::string> lines;
  for (const auto& [types, names] : fallbacks) {
    const auto& wanted = GetGgmlTypeTraits(types.first);
    std::string line = std::string(GetGgmlTypeTraits(types.second).name) + " for " + wanted.name +
                       ": " + std::to_string(names.size()) +
                       (names.size() == 1 ? " weight whose rows are" : " weights whose rows are") +
                       " not whole blocks of " + std::to_string(wanted.block_size) + " (";
    for (size_t i = 0; i < names.size() && i < 3; ++i) line += (i ? ", " : "") + names[i];
    lines.push_back(line + (names.size() > 3 ? ", ...)" : ")"));
  }
  return lines;
}

}  // namespace quantd::gguf
