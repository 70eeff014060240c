#include "worker/pipeline/weight_quantizer.h"

#include <cmath>
#include <limits>

#include "worker/common/squared_error.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/qparams.h"

namespace quantd::pipeline {

double SqnrDb(const at::Tensor& reference, const at::Tensor& quantized) {
  const SquaredError se = SumSquaredError(quantized, reference);
  const double signal = se.reference, noise = se.error;
  if (noise == 0) return std::numeric_limits<double>::infinity();
  if (signal == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

int64_t QuantizedStorageBytes(const std::vector<int64_t>& shape, const quant::QuantSpec& spec) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (quant::IsCastType(spec.dtype)) return numel * 2;
  const int64_t code_bytes = (numel * quant::BitWidth(spec.dtype) + 7) / 8;
  int64_t params = 1;
  for (int64_t d : quant::ParamSizes(shape, spec)) params *= d;
  if (quant::IsMxType(spec.dtype)) return code_bytes + params;  // one E8M0 byte per block
  int64_t param_bytes = params * 4;
  if (quant::IsIntType(spec.dtype) && !spec.symmetric) param_bytes *= 2;
  return code_bytes + param_bytes;
}

namespace {

// Parameters from the tensor itself, as the reference does for weights and
// biases, then fake quantization with them.
StatusOr<at::Tensor> FakeQuantizeFromSelf(const at::Tensor& t, const quant::QuantSpec& spec,
                                          const std::string& what, quant::QParams* used = nullptr) {
  auto qp = quant::ComputeQParams(t, spec);
  if (!qp.ok()) return Status(qp.status()).Prepend(what + ": ");
  auto q = quant::FakeQuantize(t, spec, *qp);
  if (!q.ok()) return Status(q.status()).Prepend(what + ": ");
  if (used != nullptr) *used = *qp;
  return q;
}

LayerReport BaseReport(const std::string& name, const LayerPlan& plan) {
  LayerReport report;
  report.name = name;
  report.excluded = !plan.quantized();
  report.weight_format = plan.weight ? quant::DescribeSpec(*plan.weight) : "float";
  if (plan.input) report.input_format = quant::DescribeSpec(*plan.input);
  if (plan.output) report.output_format = quant::DescribeSpec(*plan.output);
  report.weight_sqnr_db = std::numeric_limits<double>::infinity();
  return report;
}

}  // namespace

LayerReport DescribeQuantizedLayer(const models::Linear& layer, const LayerPlan& plan,
                                   const at::Tensor& reference) {
  LayerReport report = BaseReport(layer.name(), plan);
  if (reference.defined()) report.weight_sqnr_db = SqnrDb(reference, layer.weight());
  return report;
}

StatusOr<LayerReport> QuantizeEmbeddingWeight(models::Embedding& embedding, const LayerPlan& plan,
                                              quant::QParams* weight_qparams) {
  const std::string& name = embedding.info().name;
  LayerReport report = BaseReport(name, plan);
  if (plan.weight) {
    at::Tensor w = embedding.weight();
    QD_ASSIGN_OR_RETURN(at::Tensor wq,
                        FakeQuantizeFromSelf(w, *plan.weight, "embedding " + name, weight_qparams));
    report.weight_sqnr_db = SqnrDb(w, wq);
    embedding.weight() = wq;
  }
  return report;
}

namespace {

Status QuantizeBias(models::Linear& layer, const LayerPlan& plan) {
  if (plan.bias && layer.bias().defined()) {
    QD_ASSIGN_OR_RETURN(layer.bias(), FakeQuantizeFromSelf(layer.bias(), *plan.bias,
                                                           "layer " + layer.name() + " bias"));
  }
  return OkStatus();
}

}  // namespace

StatusOr<LayerReport> QuantizeLinearWeights(models::Linear& layer, const LayerPlan& plan,
                                            quant::QParams* weight_qparams) {
  LayerReport report = BaseReport(layer.name(), plan);
  if (plan.weight) {
    at::Tensor w = layer.weight();
    QD_ASSIGN_OR_RETURN(
        at::Tensor wq,
        FakeQuantizeFromSelf(w, *plan.weight, "layer " + layer.name(), weight_qparams));
    report.weight_sqnr_db = SqnrDb(w, wq);
    layer.weight() = wq;
  }
  QD_RETURN_IF_ERROR(QuantizeBias(layer, plan));
  return report;
}

LayerReport DescribeGgufLayer(const models::Linear& layer, const gguf::RecipeTensorPlan& plan,
                              const std::string& how, const at::Tensor& float_weight) {
  LayerReport report;
  report.name = layer.name();
  report.weight_format = std::string("gguf ") + gguf::GetGgmlTypeTraits(plan.type).name;
  if (!how.empty()) report.weight_format += " " + how;
  report.weight_sqnr_db = SqnrDb(float_weight, layer.weight());
  return report;
}

StatusOr<LayerReport> ApplyGgufRecipe(models::Linear& layer, const gguf::GgufRecipeWeights& recipe,
                                      const gguf::RecipeTensorPlan& plan,
                                      const at::Tensor& importance) {
  QD_ASSIGN_OR_RETURN(at::Tensor decoded,
                      recipe.Decode(layer.name() + ".weight", importance, at::kFloat));
  // Decode gives the checkpoint's layout; a layer holds [out, in].
  if (plan.transposed) decoded = decoded.t().contiguous();
  const at::Tensor w = layer.weight();
  layer.weight() = decoded.to(w.options());
  return DescribeGgufLayer(layer, plan, importance.defined() ? "imatrix" : "", w);
}

StatusOr<LayerReport> QuantizeLinearWeightsWith(models::Linear& layer, const LayerPlan& plan,
                                                const quant::QParams& weight_qparams,
                                                const at::Tensor& group_index) {
  if (!plan.weight) return InternalError("layer " + layer.name() + " has no weight spec");
  LayerReport report = BaseReport(layer.name(), plan);
  at::Tensor w = layer.weight();
  quant::QuantSpec spec = *plan.weight;
  quant::QParams qp;
  if (weight_qparams.scale.defined())
    qp.scale = weight_qparams.scale.to(w.device());  // casts: none
  if (weight_qparams.zero_point.defined()) qp.zero_point = weight_qparams.zero_point.to(w.device());
  if (group_index.defined() && qp.scale.defined())
    qp = quant::ExpandGroupsToColumns(qp, group_index, &spec);
  auto wq = quant::FakeQuantize(w, spec, qp);
  if (!wq.ok()) return Status(wq.status()).Prepend("layer " + layer.name() + ": ");
  report.weight_sqnr_db = SqnrDb(w, *wq);
  layer.weight() = *wq;
  QD_RETURN_IF_ERROR(QuantizeBias(layer, plan));
  return report;
}

}  // namespace quantd::pipeline
