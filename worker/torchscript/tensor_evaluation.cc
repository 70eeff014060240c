#include "worker/torchscript/tensor_evaluation.h"

#include <cmath>
#include <limits>

namespace quantd::torchscript {
namespace {

double Sqnr(double signal, double error) {
  if (error == 0) return std::numeric_limits<double>::infinity();
  return 10 * std::log10(signal / error);
}

}  // namespace

void EvaluationAccumulator::AddSums(Sums& s, const at::Tensor& f, const at::Tensor& q,
                                    const at::Tensor& target) {
  s.samples += f.size(0);
  s.signal += f.square().sum().item<double>();
  s.error += (q - f).square().sum().item<double>();
  if (target.defined()) {
    s.float_target += (f - target).square().sum().item<double>();
    s.quantized_target += (q - target).square().sum().item<double>();
    s.target_elements += target.numel();
  }
}

Status EvaluationAccumulator::Add(const at::Tensor& float_out, const at::Tensor& quantized_out,
                                  const at::Tensor& label, const at::Tensor& target,
                                  const at::Tensor& bucket) {
  if (!float_out.sizes().equals(quantized_out.sizes()) || float_out.dim() == 0) {
    return InvalidArgumentError("the quantized model's output shape differs from the float one's");
  }
  const at::Tensor f = float_out.to(at::kDouble), q = quantized_out.to(at::kDouble);
  at::Tensor t;
  if (target.defined()) {
    if (target.numel() != f.numel()) {
      return InvalidArgumentError("'target' has " + std::to_string(target.numel() / f.size(0)) +
                                  " values per sample, the model's output " +
                                  std::to_string(f.numel() / f.size(0)));
    }
    t = target.to(at::kDouble).reshape(f.sizes());
  }
  AddSums(all_, f, q, t);
  if (bucket.defined()) {
    const at::Tensor b = bucket.contiguous();
    const int64_t* ids = b.data_ptr<int64_t>();
    for (int64_t i = 0; i < f.size(0); ++i) {
      AddSums(buckets_[ids[i]], f.slice(0, i, i + 1), q.slice(0, i, i + 1),
              t.defined() ? t.slice(0, i, i + 1) : at::Tensor());
    }
  }
  if (f.dim() == 2) {
    const at::Tensor fa = f.argmax(1), qa = q.argmax(1);
    classified_ += f.size(0);
    agree_ += fa.eq(qa).sum().item<int64_t>();
    if (label.defined()) {
      labelled_ += f.size(0);
      float_correct_ += fa.eq(label).sum().item<int64_t>();
      quantized_correct_ += qa.eq(label).sum().item<int64_t>();
    }
  } else if (label.defined()) {
    return InvalidArgumentError(
        "the dataset has labels but the model's output is not [samples, "
        "classes]");
  }
  return OkStatus();
}

std::optional<double> EvaluationAccumulator::top1_agreement() const {
  if (classified_ == 0) return std::nullopt;
  return static_cast<double>(agree_) / classified_;
}

pipeline::TensorEvaluation EvaluationAccumulator::Finish() const {
  pipeline::TensorEvaluation e;
  e.samples = all_.samples;
  if (labelled_ > 0) {
    e.float_top1_accuracy = static_cast<double>(float_correct_) / labelled_;
    e.quantized_top1_accuracy = static_cast<double>(quantized_correct_) / labelled_;
  }
  e.output_sqnr_db = Sqnr(all_.signal, all_.error);
  e.output_relative_mse = all_.signal > 0 ? all_.error / all_.signal : 0;
  if (all_.target_elements > 0) {
    e.float_target_mse = all_.float_target / all_.target_elements;
    e.quantized_target_mse = all_.quantized_target / all_.target_elements;
  }
  for (const auto& [id, s] : buckets_) {
    pipeline::BucketReport b;
    b.bucket = id;
    b.samples = s.samples;
    b.output_sqnr_db = Sqnr(s.signal, s.error);
    b.output_relative_mse = s.signal > 0 ? s.error / s.signal : 0;
    if (s.target_elements > 0) {
      b.float_target_mse = s.float_target / s.target_elements;
      b.quantized_target_mse = s.quantized_target / s.target_elements;
    }
    e.buckets.push_back(b);
  }
  return e;
}

}  // namespace quantd::torchscript
