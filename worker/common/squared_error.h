// Sums of squares in float64 over tensors of any size: the reference's
// energy and the error's, behind every SQNR and relative-MSE figure the
// engine reports (weights, block outputs, SmoothQuant and AWQ losses).
//
// Computed a slice at a time, so no float64 copy of a large tensor is ever
// whole: a block's calibration output at Llama-3-8B shapes with 128 x 2048
// tokens is 4 GiB of float32, and converting it (and the error) to float64
// at once held about 20 GiB more on the GPU than the job's activations.
#ifndef QUANTD_WORKER_COMMON_SQUARED_ERROR_H_
#define QUANTD_WORKER_COMMON_SQUARED_ERROR_H_

#include <ATen/ATen.h>

namespace quantd {

struct SquaredError {
  double reference = 0;  // sum of ref^2
  double error = 0;      // sum of (out - ref)^2
};

// out and ref: the same number of elements, on one device, any floating
// dtype (a c10::Error otherwise); each element is taken to float64 before it is subtracted and
// squared. One host synchronisation, at the end.
SquaredError SumSquaredError(const at::Tensor& out, const at::Tensor& ref);

// Sum of x^2 in float64, likewise a slice at a time.
double SumOfSquares(const at::Tensor& x);

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_SQUARED_ERROR_H_
