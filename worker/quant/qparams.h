// Quantization parameters (scale and zero point) of a tensor, and how they
// follow from observed ranges, exactly as the reference toolkit computes them:
//
//  - integer, symmetric:  scale = amax / ((qmax - qmin) / 2), at least 2^-23;
//    zero point 0 (signed) or the midpoint (qmax + 1) / 2 (unsigned);
//  - integer, asymmetric: the range is widened to include 0,
//    scale = (max - min) / (qmax - qmin), at least 2^-23,
//    zp = clamp(qmin - round_half_even(min / scale), qmin, qmax);
//    with a float32 zero point the range is not widened and
//    zp = qmin - min / scale (scale 1 when the range is below 2^-23);
//  - FP8: scale = amax / max_norm (448 or 57344), 2^-23 when that is 0.
//  - A slot that saw no data (or a NaN) gets scale 1, zero point 0.
//
// The scale is then stored in its scale_type: "float" rounds it to the
// input's dtype (a no-op for float32 inputs), float16 / bfloat16 round to
// those, pof2 rounds log2(scale) to the nearest integer; the zero point is
// computed from the rounded scale.
//
// Every computation exists twice: on float arrays (the fused CPU kernels)
// and as composed ATen ops (any device); the two are bit-identical.
#ifndef QUANTD_WORKER_QUANT_QPARAMS_H_
#define QUANTD_WORKER_QUANT_QPARAMS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "worker/common/status.h"
#include "worker/quant/kernel_common.h"
#include "worker/quant/spec.h"

namespace quantd::quant {

// Parameters of one quantized tensor. Shapes follow the granularity:
//   per_tensor:  scale is 0-dim;
//   per_channel: [C], C = size of ch_axis;
//   per_group / MX: the input's shape with the group axis replaced by the
//     number of groups (ceil(n / group_size); MX pads the last block).
// scale is float32 and holds the value the kernels use. zero_point is int32
// (zero_point_type int32) or float32; it is undefined for FP8, MX and casts.
struct QParams {
  at::Tensor scale;
  at::Tensor zero_point;

  bool defined() const { return scale.defined(); }
};

// How a computed float32 scale is stored (see the file comment).
enum class ScaleRounding { kNone, kToFloat16, kToBFloat16, kPowerOf2 };
ScaleRounding ScaleRoundingFor(const QuantSpec& spec, at::ScalarType input_dtype);

// Applies ScaleRounding to one scale.
float RoundScale(float scale, ScaleRounding r);

// The constants of an integer spec that the parameter formulas need.
struct IntQParamConsts {
  float qmin = 0;
  float qmax = 0;
  bool symmetric = true;
  bool float_zero_point = false;
  float symmetric_zero_point = 0;  // 0 for signed, (qmax + 1) / 2 for unsigned
  ScaleRounding rounding = ScaleRounding::kNone;
};
IntQParamConsts IntConstsFor(const QuantSpec& spec, at::ScalarType input_dtype);

// Scale and zero point of one slot from its observed min and max.
struct ScaleZeroPoint {
  float scale;
  float zero_point;
};
ScaleZeroPoint IntQParamsFromMinMax(float mn, float mx, const IntQParamConsts& c);
// FP8 scale of one slot.
float Fp8ScaleFromMinMax(float mn, float mx, float max_norm, ScaleRounding r);

// The kernel view of a tensor of `sizes` for `spec`: INVALID_ARGUMENT when
// ch_axis is out of range or a per_group axis is not a multiple of the group
// size (MX pads instead).
StatusOr<kernel::KernelShape> KernelShapeFor(const std::vector<int64_t>& sizes,
                                             const QuantSpec& spec);
// The shape of scale / zero_point for a tensor of `sizes` (see QParams).
std::vector<int64_t> ParamSizes(const std::vector<int64_t>& sizes, const QuantSpec& spec);

// Composed-ATen min and max per parameter slot (any device), shaped as
// ParamSizes(x); float32. NaN propagates (at::aminmax).
StatusOr<std::pair<at::Tensor, at::Tensor>> MinMaxComposed(const at::Tensor& x,
                                                           const QuantSpec& spec);

// The same with the fused CPU reduction (contiguous CPU float32 / float16 /
// bfloat16 input); CPU float32 results.
StatusOr<std::pair<at::Tensor, at::Tensor>> MinMaxFused(const at::Tensor& x, const QuantSpec& spec);

// Parameters from per-slot min / max tensors (float32, any device, shaped as
// ParamSizes): composed ATen ops, bit-identical to IntQParamsFromMinMax /
// Fp8ScaleFromMinMax. For integer and FP8 specs only.
StatusOr<QParams> QParamsFromMinMax(const at::Tensor& mn, const at::Tensor& mx,
                                    const QuantSpec& spec, at::ScalarType input_dtype);

// The same on CPU float arrays (n slots); zp is unused for FP8.
void QParamsFromMinMaxArrays(const float* mn, const float* mx, int64_t n, const QuantSpec& spec,
                             at::ScalarType input_dtype, float* scale, float* zp);

// Per-group parameters [out, G] whose groups are runs of permuted columns
// (GPTQ's act_order without static_groups), expanded by `group_index`
// (integers [in], the group of each column) to one group per column:
// quantizing with them and `*spec` (set to group_size 1) gives each column
// its group's parameters. On the parameters' device.
QParams ExpandGroupsToColumns(const QParams& qp, const at::Tensor& group_index, QuantSpec* spec);

// Packs float arrays into a QParams of `param_sizes` (CPU tensors).
QParams MakeQParams(const std::vector<int64_t>& param_sizes, const std::vector<float>& scale,
                    const std::vector<float>* zero_point, bool float_zero_point);

// ---- argument plumbing shared by the format kernels ----

// The fused kernels take contiguous CPU float32 / float16 / bfloat16 input
// and an output of the same shape and dtype.
Status CheckFusedArgs(const at::Tensor& x, const at::Tensor& out);
// A parameter tensor as a float vector of `expected` entries (any device,
// any float or integer dtype); INVALID_ARGUMENT when the count differs.
StatusOr<std::vector<float>> ParamArray(const at::Tensor& t, int64_t expected, const char* what);
// x in the kernel's view: [numel] (per tensor), [outer, n, inner] (per
// channel) or [outer, G, group, inner] (per group, whole groups only).
at::Tensor KernelView(const at::Tensor& x, const kernel::KernelShape& s);
// A parameter tensor shaped to broadcast against KernelView.
at::Tensor BroadcastParam(const at::Tensor& p, const kernel::KernelShape& s);

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_QPARAMS_H_
