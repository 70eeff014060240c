// The dtype that the matrix products of forward passes run in on this
// thread: Linear layers (x W^T + b) and attention's two products. Unset, they
// run in their inputs' dtype (float32 in the engine). A MatmulDtypeScope sets
// it: each product then takes its operands in that dtype and returns its
// result in the input's, so norms, softmax, residuals and everything hooks
// observe (Hessians, activation statistics) keep float32. The quantization
// job sets it around its calibration passes (CalibrationOptions::
// compute_dtype, bfloat16 as a bf16 checkpoint computes); evaluation never
// does. Thread-local, like a framework's autocast state, because the passes
// reach the products through code that has no reason to know.
#ifndef QUANTD_WORKER_MODELS_MATMUL_DTYPE_H_
#define QUANTD_WORKER_MODELS_MATMUL_DTYPE_H_

#include <ATen/ATen.h>

#include <optional>

namespace quantd::models {

std::optional<at::ScalarType> MatmulDtype();

class MatmulDtypeScope {
 public:
  // nullopt leaves the thread's setting as it is.
  explicit MatmulDtypeScope(std::optional<at::ScalarType> dtype);
  ~MatmulDtypeScope();
  MatmulDtypeScope(const MatmulDtypeScope&) = delete;
  MatmulDtypeScope& operator=(const MatmulDtypeScope&) = delete;

 private:
  std::optional<at::ScalarType> previous_;
};

// at::matmul(a, b) in MatmulDtype() when set and not a's dtype, the result
// in a's dtype.
at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b);

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_MATMUL_DTYPE_H_
