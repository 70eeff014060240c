#include "worker/quant_modules/quant_embedding_bag.h"

#include <c10/util/Exception.h>

#include <tuple>

namespace quantd::quant_modules {

StatusOr<std::unique_ptr<QuantEmbeddingBag>> QuantEmbeddingBag::Create(
    std::string name, at::Tensor weight, BagMode mode, const pipeline::LayerPlan& plan) {
  if (!weight.defined() || weight.dim() != 2) {
    return InvalidArgumentError(name + ": an EmbeddingBag table must be 2-D [num, dim]");
  }
  if (plan.input) {
    return InvalidArgumentError(name +
                                ": an EmbeddingBag's input is indices; its plan cannot "
                                "quantize input_tensors");
  }
  if (plan.bias) return InvalidArgumentError(name + ": an EmbeddingBag has no bias to quantize");
  std::unique_ptr<QuantEmbeddingBag> m(new QuantEmbeddingBag());
  m->name_ = std::move(name);
  m->mode_ = mode;
  m->num_ = weight.size(0);
  m->dim_ = weight.size(1);
  m->dtype_ = weight.scalar_type();
  QD_ASSIGN_OR_RETURN(m->weight_,
                      ModuleWeight::Create(std::move(weight), plan.weight, m->name_ + " weight"));
  QD_ASSIGN_OR_RETURN(m->output_, ActivationQuantizer::Create(plan.output, m->name_ + " output"));
  return m;
}

StatusOr<at::Tensor> QuantEmbeddingBag::Reduce(const Bags& b) const {
  const auto is_ids = [](const at::Tensor& t) {
    return t.defined() && t.dim() == 1 && t.scalar_type() == at::kLong;
  };
  if (!is_ids(b.indices) || !is_ids(b.offsets)) {
    return InvalidArgumentError(name_ + ": indices and offsets must be 1-D int64 tensors");
  }
  if (b.indices.numel() > 0) {
    const int64_t lo = b.indices.min().item<int64_t>(), hi = b.indices.max().item<int64_t>();
    if (lo < 0 || hi >= num_) {
      return InvalidArgumentError(name_ + ": index " + std::to_string(lo < 0 ? lo : hi) +
                                  " is outside the table's " + std::to_string(num_) + " rows");
    }
  }
  if (b.offsets.numel() == 0 || b.offsets[0].item<int64_t>() != 0 ||
      (b.offsets.numel() > 1 && (b.offsets.diff() < 0).any().item<bool>()) ||
      b.offsets[-1].item<int64_t>() > b.indices.numel()) {
    return InvalidArgumentError(name_ +
                                ": offsets must start at 0, not decrease, and stay "
                                "within the indices");
  }
  const at::Tensor& w = b.per_sample_weights;
  if (w.defined() && (mode_ != BagMode::kSum || w.dim() != 1 || w.numel() != b.indices.numel() ||
                      !w.is_floating_point())) {
    return InvalidArgumentError(name_ +
                                ": per-sample weights go with sum bags, one float per index");
  }
  QD_ASSIGN_OR_RETURN(at::Tensor table, weight_.Effective(dtype_, b.indices.device()));
  const int64_t mode = mode_ == BagMode::kSum ? 0 : mode_ == BagMode::kMean ? 1 : 2;
  try {
    return std::get<0>(at::embedding_bag(table, b.indices, b.offsets,
                                         /*scale_grad_by_freq=*/false, mode, /*sparse=*/false,
                                         w.defined() ? w.to(dtype_) : at::Tensor()));
  } catch (const c10::Error& e) {
    return InvalidArgumentError(name_ + ": " + e.what_without_backtrace());
  }
}

Status QuantEmbeddingBag::Calibrate(const std::vector<Bags>& batches) {
  if (batches.empty()) return InvalidArgumentError(name_ + ": no calibration batches");
  if (output_.is_static()) {
    for (const auto& b : batches) {
      QD_ASSIGN_OR_RETURN(at::Tensor y, Reduce(b));
      QD_RETURN_IF_ERROR(output_.Observe(y));
    }
  }
  return output_.Finish();
}

StatusOr<at::Tensor> QuantEmbeddingBag::Forward(const Bags& bags) const {
  QD_ASSIGN_OR_RETURN(at::Tensor y, Reduce(bags));
  return output_.Apply(y);
}

StatusOr<pipeline::FreezeReport> QuantEmbeddingBag::Freeze() {
  pipeline::FreezeReport report;
  QD_RETURN_IF_ERROR(weight_.Freeze(report));
  return report;
}

}  // namespace quantd::quant_modules
