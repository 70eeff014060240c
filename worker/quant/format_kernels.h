// The kernel entry points of each format family: the torch half of the
// format table. A DataType's row in format_table.h (torch-free, so the server
// can link it) names its family; the family's FormatKernels row here names
// the functions that quantize it, so fake_quant.cc looks a spec's kernels up
// once per tensor instead of switching on the family in every entry point.
//
// Every entry point has one signature for all families; where a family's
// own function takes fewer arguments (a cast has no parameters) or needs a
// step first (MX block scales from x when none are given), the row holds a
// small adapter. The CUDA kernels (worker/quant/cuda/) are not in the table:
// they exist only in CMake builds with nvcc, and fake_quant.cc picks them by
// device before it looks here.
//
// Internal to worker/quant; fake_quant.h is the public interface.
#ifndef QUANTD_WORKER_QUANT_FORMAT_KERNELS_H_
#define QUANTD_WORKER_QUANT_FORMAT_KERNELS_H_

#include <ATen/ATen.h>

#include <utility>

#include "worker/common/status.h"
#include "worker/quant/format_table.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant {

// The three implementations of every operation agree bit for bit: `fused`
// (the CPU kernel; contiguous CPU input, `out` of x's shape and dtype),
// `ref` (its scalar twin) and `composed` (eager ATen ops, any device).
struct FormatKernels {
  // Parameters of x alone at the spec's granularity: the spec's observer
  // (min-max, or one batch through a percentile / MSE histogram) for
  // integers and FP8, the block scales for MX, none for casts. `composed`
  // picks the ATen reductions; otherwise x is contiguous on the CPU.
  StatusOr<QParams> (*qparams)(const at::Tensor& x, const QuantSpec& spec, bool composed);

  // Fake quantization with given parameters (MX: block scales from x when
  // qp.scale is undefined; casts ignore qp).
  Status (*fake_quant_fused)(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                             at::Tensor& out);
  Status (*fake_quant_ref)(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                           at::Tensor& out);
  StatusOr<at::Tensor> (*fake_quant_composed)(const at::Tensor& x, const QuantSpec& spec,
                                              const QParams& qp);

  // Dynamic fake quantization: parameters from x at this call; returns the
  // parameters used (empty for casts).
  StatusOr<QParams> (*fake_quant_dynamic_fused)(const at::Tensor& x, const QuantSpec& spec,
                                                at::Tensor& out);
  StatusOr<std::pair<at::Tensor, QParams>> (*fake_quant_dynamic_composed)(const at::Tensor& x,
                                                                          const QuantSpec& spec);

  // Real quantization to codes (fake_quant.h's QuantizedTensor::codes) and
  // back to float32 values times their scales (any device; casts return
  // the codes, already floats). Casts do not quantize: RealQuantize casts.
  StatusOr<at::Tensor> (*quantize_fused)(const at::Tensor& x, const QuantSpec& spec,
                                         const QParams& qp);
  StatusOr<at::Tensor> (*quantize_composed)(const at::Tensor& x, const QuantSpec& spec,
                                            const QParams& qp);
  StatusOr<at::Tensor> (*dequantize)(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp);
};

// The kernels of `family`; INVALID_ARGUMENT for FormatFamily::kUnknown.
StatusOr<const FormatKernels*> KernelsOf(FormatFamily family);
// The kernels of the spec's data type (FormatOf(spec.dtype).family).
StatusOr<const FormatKernels*> KernelsFor(const QuantSpec& spec);

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_FORMAT_KERNELS_H_
