// Accumulates a tensor-dataset evaluation batch by batch: top-1 accuracy
// against labels, output SQNR and relative MSE of the quantized model
// against the float one, MSE against targets, overall and per bucket. Sums
// are float64 (their error is about n * 2^-53 relative, far below what is
// reported).
#ifndef QUANTD_WORKER_TORCHSCRIPT_TENSOR_EVALUATION_H_
#define QUANTD_WORKER_TORCHSCRIPT_TENSOR_EVALUATION_H_

#include <ATen/ATen.h>

#include <map>

#include "worker/common/status.h"
#include "worker/pipeline/job_options.h"

namespace quantd::torchscript {

class EvaluationAccumulator {
 public:
  // One batch: the float and quantized outputs (same shape, first axis =
  // samples) and the batch's label / target / bucket (each may be
  // undefined). INVALID_ARGUMENT when shapes disagree, or labels are given
  // and the outputs are not [N, classes].
  Status Add(const at::Tensor& float_out, const at::Tensor& quantized_out, const at::Tensor& label,
             const at::Tensor& target, const at::Tensor& bucket);
  pipeline::TensorEvaluation Finish() const;
  // float_top1 agreement of the quantized argmax with the float argmax for
  // [N, classes] outputs.
  std::optional<double> top1_agreement() const;

 private:
  struct Sums {
    int64_t samples = 0;
    double signal = 0, error = 0;
    double float_target = 0, quantized_target = 0;
    int64_t target_elements = 0;
  };
  void AddSums(Sums& s, const at::Tensor& f, const at::Tensor& q, const at::Tensor& target);

  Sums all_;
  std::map<int64_t, Sums> buckets_;
  int64_t labelled_ = 0, float_correct_ = 0, quantized_correct_ = 0;
  int64_t classified_ = 0, agree_ = 0;
};

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_TENSOR_EVALUATION_H_
