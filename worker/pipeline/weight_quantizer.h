// Round-to-nearest quantization of a linear layer's weight and bias, in
// place, with the error it introduced (weight SQNR) and the storage it will
// take once frozen or exported.
#ifndef QUANTD_WORKER_PIPELINE_WEIGHT_QUANTIZER_H_
#define QUANTD_WORKER_PIPELINE_WEIGHT_QUANTIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "worker/common/status.h"
#include "worker/export/gguf/gguf_recipe_weights.h"
#include "worker/models/causal_lm.h"
#include "worker/models/linear.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {

// 10 log10(||w||^2 / ||w - w_q||^2), in float64; +inf when w_q == w.
double SqnrDb(const at::Tensor& reference, const at::Tensor& quantized);

// Bytes a tensor of `shape` takes real-quantized with `spec`: packed codes
// plus float32 scales (and zero points for asymmetric integers; E8M0 bytes
// for MX).
int64_t QuantizedStorageBytes(const std::vector<int64_t>& shape, const quant::QuantSpec& spec);

// Replaces the layer's weight (and bias) by their fake-quantized values per
// `plan` and describes what it did; `weight_qparams`, when not null,
// receives the weight's parameters. INVALID_ARGUMENT naming the layer when
// the weight does not fit the spec (e.g. a group size that does not divide
// in_features).
// The token embedding's weight (QuantEmbedding: weight only), fake-quantized
// in place with parameters from itself; `weight_qparams` receives them.
StatusOr<LayerReport> QuantizeEmbeddingWeight(models::Embedding& embedding, const LayerPlan& plan,
                                              quant::QParams* weight_qparams = nullptr);

StatusOr<LayerReport> QuantizeLinearWeights(models::Linear& layer, const LayerPlan& plan,
                                            quant::QParams* weight_qparams = nullptr);

// QuantizeLinearWeights with the weight parameters given (those a quantized
// checkpoint stored, stored_quantization.h) instead of fitted; with
// `group_index` (int32 [in]) each column takes its group's parameters.
StatusOr<LayerReport> QuantizeLinearWeightsWith(models::Linear& layer, const LayerPlan& plan,
                                                const quant::QParams& weight_qparams,
                                                const at::Tensor& group_index);

// A job with a llama.cpp recipe: the layer's weight becomes the recipe's
// decoded blocks (`plan` says which type), quantized with `importance`
// (per input column, an imatrix's weights) when it is defined, reported as
// "gguf <type>" (" imatrix") with its SQNR against the float weight.
StatusOr<LayerReport> ApplyGgufRecipe(models::Linear& layer, const gguf::GgufRecipeWeights& recipe,
                                      const gguf::RecipeTensorPlan& plan,
                                      const at::Tensor& importance);

// The report of a recipe layer whose weight holds its decoded blocks:
// "gguf <type>" plus " <how>" ("imatrix", "gptq") when given, with the SQNR
// of the weight against `float_weight`.
LayerReport DescribeGgufLayer(const models::Linear& layer, const gguf::RecipeTensorPlan& plan,
                              const std::string& how, const at::Tensor& float_weight);

// The report of a layer whose weight something else (an algorithm) already
// quantized: formats from `plan`, SQNR of `quantized` against `reference`.
LayerReport DescribeQuantizedLayer(const models::Linear& layer, const LayerPlan& plan,
                                   const at::Tensor& reference);

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_WEIGHT_QUANTIZER_H_
