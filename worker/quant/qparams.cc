#include "worker/quant/qparams.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "worker/quant/element_ops.h"
#include "worker/quant/scaled_kernel.h"

namespace quantd::quant {
namespace {

// t / v with v as a tensor on t's device: CUDA turns a division by a CPU
// scalar into a multiplication by its reciprocal, which rounds differently.
at::Tensor DivConst(const at::Tensor& t, double v) {
  return at::div(t, at::full({}, v, t.options()));
}

int NormalizeAxis(int axis, int64_t rank) {
  return axis < 0 ? axis + static_cast<int>(rank) : axis;
}

// Composed twin of RoundScale on a float32 tensor.
at::Tensor RoundScaleComposed(const at::Tensor& scale, ScaleRounding r) {
  at::Tensor out;
  switch (r) {
    case ScaleRounding::kNone:
      return scale;
    case ScaleRounding::kToFloat16:
      out = scale.to(at::kHalf).to(at::kFloat);
      break;
    case ScaleRounding::kToBFloat16:
      out = scale.to(at::kBFloat16).to(at::kFloat);
      break;
    case ScaleRounding::kPowerOf2: {
      // log2(scale) rounded to the nearest integer, decided exactly: with
      // scale = m * 2^e, m in [0.5, 1), round up when (2m)^2 >= 2 (m^2 is
      // exact in float64).
      auto [m, e] = at::frexp(scale);
      at::Tensor m64 = m.to(at::kDouble);
      at::Tensor up = (m64 * m64).ge(0.5).to(at::kInt);
      at::Tensor k = (e - 1 + up).clamp(-126, 127);
      out = ((k + 127) * 8388608).to(at::kInt).view(at::kFloat);
      break;
    }
  }
  // A scale that rounded to 0 in float16 would divide by zero; keep the floor.
  const float floor_value = RoundScale(kScaleFloor, r);
  return at::where(out.eq(0), at::full({}, floor_value, out.options()), out);
}

}  // namespace

ScaleRounding ScaleRoundingFor(const QuantSpec& spec, at::ScalarType input_dtype) {
  switch (spec.scale_type) {
    case ScaleType::kFloat:
      if (input_dtype == at::kHalf) return ScaleRounding::kToFloat16;
      if (input_dtype == at::kBFloat16) return ScaleRounding::kToBFloat16;
      return ScaleRounding::kNone;
    case ScaleType::kFloat32:
      return ScaleRounding::kNone;
    case ScaleType::kFloat16:
      return ScaleRounding::kToFloat16;
    case ScaleType::kBFloat16:
      return ScaleRounding::kToBFloat16;
    case ScaleType::kPowerOf2:
      return ScaleRounding::kPowerOf2;
  }
  return ScaleRounding::kNone;
}

float RoundScale(float scale, ScaleRounding r) {
  float out = scale;
  switch (r) {
    case ScaleRounding::kNone:
      return scale;
    case ScaleRounding::kToFloat16:
      out = RoundToFloat16(scale);
      break;
    case ScaleRounding::kToBFloat16:
      out = RoundToBFloat16(scale);
      break;
    case ScaleRounding::kPowerOf2: {
      int e = 0;
      const double m = std::frexp(static_cast<double>(scale), &e);
      const int k = std::min(std::max(e - 1 + (m * m >= 0.5 ? 1 : 0), -126), 127);
      out = Pow2(k);
      break;
    }
  }
  return out == 0.0f ? RoundScale(kScaleFloor, r) : out;
}

IntQParamConsts IntConstsFor(const QuantSpec& spec, at::ScalarType input_dtype) {
  const IntRange range = IntRangeOf(spec.dtype);
  IntQParamConsts c;
  c.qmin = static_cast<float>(range.qmin);
  c.qmax = static_cast<float>(range.qmax);
  c.symmetric = spec.symmetric;
  c.float_zero_point = !spec.symmetric && spec.zero_point_type == ZeroPointType::kFloat32;
  c.symmetric_zero_point =
      IsSignedInt(spec.dtype) ? 0.0f : static_cast<float>((range.qmax + 1) / 2);
  c.rounding = ScaleRoundingFor(spec, input_dtype);
  return c;
}

ScaleZeroPoint IntQParamsFromMinMax(float mn, float mx, const IntQParamConsts& c) {
  const element::IntSlotParams p = element::IntParamsFromMinMax(
      mn, mx, c.qmin, c.qmax, c.symmetric, c.float_zero_point, c.symmetric_zero_point,
      [&c](float s) { return RoundScale(s, c.rounding); });
  return {p.scale, p.zero_point};
}

float Fp8ScaleFromMinMax(float mn, float mx, float max_norm, ScaleRounding r) {
  if (!(mn <= mx)) return 1.0f;
  const float amax = std::max(-std::min(mn, 0.0f), std::max(mx, 0.0f));
  const float scale = amax / max_norm;
  return RoundScale(scale == 0.0f ? kScaleFloor : scale, r);
}

StatusOr<kernel::KernelShape> KernelShapeFor(const std::vector<int64_t>& sizes,
                                             const QuantSpec& spec) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  const bool mx = IsMxType(spec.dtype);
  if (!mx && spec.qscheme == QScheme::kPerTensor) {
    return kernel::MakeKernelShape(sizes, 0, kernel::ParamLayout::kScalar, 1);
  }
  const int raw_axis = EffectiveChAxis(spec);
  const int axis = NormalizeAxis(raw_axis, rank);
  if (rank == 0 || axis < 0 || axis >= rank) {
    return InvalidArgumentError("ch_axis " + std::to_string(raw_axis) + " is out of range for a " +
                                std::to_string(rank) + "-d tensor")
        .WithReason("INVALID_QUANT_CONFIG");
  }
  if (!mx && spec.qscheme == QScheme::kPerChannel) {
    return kernel::MakeKernelShape(sizes, axis, kernel::ParamLayout::kPerChannel, 1);
  }
  const int64_t n = sizes[axis];
  int64_t group = EffectiveGroupSize(spec);
  if (group == -1) group = std::max<int64_t>(n, 1);
  if (group <= 0) {
    return InvalidArgumentError("per_group needs a positive group_size; got " +
                                std::to_string(group))
        .WithReason("INVALID_QUANT_CONFIG");
  }
  if (!mx && n % group != 0) {
    return InvalidArgumentError("per_group: axis " + std::to_string(axis) + " has " +
                                std::to_string(n) + " elements, not a multiple of group_size " +
                                std::to_string(group))
        .WithReason("INVALID_QUANT_CONFIG");
  }
  return kernel::MakeKernelShape(sizes, axis, kernel::ParamLayout::kPerGroup, group);
}

std::vector<int64_t> ParamSizes(const std::vector<int64_t>& sizes, const QuantSpec& spec) {
  const bool mx = IsMxType(spec.dtype);
  if (!mx && spec.qscheme == QScheme::kPerTensor) return {};
  const int axis = NormalizeAxis(EffectiveChAxis(spec), static_cast<int64_t>(sizes.size()));
  if (axis < 0 || axis >= static_cast<int>(sizes.size())) return {};
  if (!mx && spec.qscheme == QScheme::kPerChannel) return {sizes[axis]};
  std::vector<int64_t> out = sizes;
  int64_t group = EffectiveGroupSize(spec);
  if (group == -1) group = std::max<int64_t>(sizes[axis], 1);
  out[axis] = group > 0 ? (sizes[axis] + group - 1) / group : 0;
  return out;
}

StatusOr<std::pair<at::Tensor, at::Tensor>> MinMaxComposed(const at::Tensor& x,
                                                           const QuantSpec& spec) {
  QD_ASSIGN_OR_RETURN(kernel::KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const at::Tensor xf = x.to(at::kFloat);
  const std::vector<int64_t> psizes = ParamSizes(x.sizes().vec(), spec);
  switch (s.layout) {
    case kernel::ParamLayout::kScalar: {
      auto [mn, mx] = at::aminmax(xf);
      return std::make_pair(mn, mx);
    }
    case kernel::ParamLayout::kPerChannel: {
      at::Tensor v = xf.reshape({s.outer, s.n, s.inner});
      return std::make_pair(at::amin(v, {0, 2}), at::amax(v, {0, 2}));
    }
    case kernel::ParamLayout::kPerGroup: {
      if (s.n % s.group != 0) {
        return InvalidArgumentError("composed min/max needs whole groups");
      }
      at::Tensor v = xf.reshape({s.outer, s.num_groups, s.group, s.inner});
      return std::make_pair(at::amin(v, {2}).reshape(psizes), at::amax(v, {2}).reshape(psizes));
    }
  }
  return InternalError("unknown parameter layout");
}

StatusOr<std::pair<at::Tensor, at::Tensor>> MinMaxFused(const at::Tensor& x,
                                                        const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(kernel::KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const std::vector<int64_t> psizes = ParamSizes(x.sizes().vec(), spec);
  at::Tensor mn = at::empty(psizes, at::kFloat);
  at::Tensor mx = at::empty(psizes, at::kFloat);
  kernel::DispatchFloatIo(x.scalar_type(), [&](auto io) {
    using Io = decltype(io);
    kernel::ReduceMinMax<Io>(s, static_cast<const typename Io::T*>(x.data_ptr()),
                             mn.data_ptr<float>(), mx.data_ptr<float>());
  });
  return std::make_pair(mn, mx);
}

StatusOr<QParams> QParamsFromMinMax(const at::Tensor& mn_in, const at::Tensor& mx_in,
                                    const QuantSpec& spec, at::ScalarType input_dtype) {
  const at::Tensor mn = mn_in.to(at::kFloat);
  const at::Tensor mx = mx_in.to(at::kFloat);
  const at::Tensor valid = mn.le(mx);
  const at::Tensor min_neg = at::clamp_max(mn, 0.0);
  const at::Tensor max_pos = at::clamp_min(mx, 0.0);
  const at::Tensor one = at::ones({}, mn.options());
  QParams qp;
  if (IsFp8Type(spec.dtype)) {
    const float max_norm = MinifloatFormatOf(spec.dtype).max_norm;
    at::Tensor amax = at::maximum(at::neg(min_neg), max_pos);
    at::Tensor scale = DivConst(amax, max_norm);
    scale = at::where(scale.eq(0), at::full({}, kScaleFloor, scale.options()), scale);
    scale = RoundScaleComposed(scale, ScaleRoundingFor(spec, input_dtype));
    qp.scale = at::where(valid, scale, one);
    return qp;
  }
  if (!IsIntType(spec.dtype)) {
    return InvalidArgumentError("scale from min/max is defined for integer and FP8 specs, not " +
                                std::string(DataTypeName(spec.dtype)));
  }
  const IntQParamConsts c = IntConstsFor(spec, input_dtype);
  const at::Tensor floor_t = at::full({}, kScaleFloor, mn.options());
  at::Tensor scale;
  at::Tensor zp;
  if (c.symmetric) {
    at::Tensor amax = at::maximum(at::neg(min_neg), max_pos);
    scale = DivConst(amax, (c.qmax - c.qmin) / 2.0f);
    scale = RoundScaleComposed(at::maximum(scale, floor_t), c.rounding);
    zp = at::full_like(scale, c.symmetric_zero_point);
  } else if (c.float_zero_point) {
    scale = DivConst(mx - mn, c.qmax - c.qmin);
    scale = RoundScaleComposed(at::where(scale.gt(kScaleFloor), scale, one), c.rounding);
    zp = at::rsub(at::div(mn, scale), c.qmin);
  } else {
    scale = DivConst(max_pos - min_neg, c.qmax - c.qmin);
    scale = RoundScaleComposed(at::maximum(scale, floor_t), c.rounding);
    zp = at::clamp(at::rsub(at::round(at::div(min_neg, scale)), c.qmin), c.qmin, c.qmax);
  }
  qp.scale = at::where(valid, scale, one);
  zp = at::where(valid, zp, at::zeros({}, zp.options()));
  qp.zero_point = c.float_zero_point ? zp : zp.to(at::kInt);
  return qp;
}

void QParamsFromMinMaxArrays(const float* mn, const float* mx, int64_t n, const QuantSpec& spec,
                             at::ScalarType input_dtype, float* scale, float* zp) {
  if (IsFp8Type(spec.dtype)) {
    const float max_norm = MinifloatFormatOf(spec.dtype).max_norm;
    const ScaleRounding r = ScaleRoundingFor(spec, input_dtype);
    for (int64_t i = 0; i < n; ++i) scale[i] = Fp8ScaleFromMinMax(mn[i], mx[i], max_norm, r);
    return;
  }
  const IntQParamConsts c = IntConstsFor(spec, input_dtype);
  for (int64_t i = 0; i < n; ++i) {
    const ScaleZeroPoint p = IntQParamsFromMinMax(mn[i], mx[i], c);
    scale[i] = p.scale;
    zp[i] = p.zero_point;
  }
}

QParams MakeQParams(const std::vector<int64_t>& param_sizes, const std::vector<float>& scale,
                    const std::vector<float>* zero_point, bool float_zero_point) {
  QParams qp;
  qp.scale = at::empty(param_sizes, at::kFloat);
  std::memcpy(qp.scale.data_ptr<float>(), scale.data(), scale.size() * sizeof(float));
  if (zero_point != nullptr) {
    at::Tensor zp = at::empty(param_sizes, at::kFloat);
    std::memcpy(zp.data_ptr<float>(), zero_point->data(), zero_point->size() * sizeof(float));
    qp.zero_point = float_zero_point ? zp : zp.to(at::kInt);
  }
  return qp;
}

Status CheckFusedArgs(const at::Tensor& x, const at::Tensor& out) {
  const at::ScalarType t = x.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) {
    return InvalidArgumentError(std::string("quantization input must be float32, float16 or "
                                            "bfloat16; got ") +
                                c10::toString(t));
  }
  if (!x.device().is_cpu() || !x.is_contiguous()) {
    return InvalidArgumentError("the fused kernels need a contiguous CPU tensor");
  }
  if (!out.defined() || out.sizes() != x.sizes() || out.scalar_type() != t ||
      !out.device().is_cpu() || !out.is_contiguous()) {
    return InvalidArgumentError(
        "the output must be a contiguous CPU tensor of the input's shape "
        "and dtype");
  }
  return OkStatus();
}

StatusOr<std::vector<float>> ParamArray(const at::Tensor& t, int64_t expected, const char* what) {
  if (!t.defined()) return InvalidArgumentError(std::string("missing ") + what);
  if (t.numel() != expected) {
    return InvalidArgumentError(std::string(what) + " has " + std::to_string(t.numel()) +
                                " entries; the tensor and spec need " + std::to_string(expected));
  }
  at::Tensor c = t.to(at::kCPU).to(at::kFloat).contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + expected);
}

at::Tensor KernelView(const at::Tensor& x, const kernel::KernelShape& s) {
  switch (s.layout) {
    case kernel::ParamLayout::kScalar:
      return x.reshape({s.numel()});
    case kernel::ParamLayout::kPerChannel:
      return x.reshape({s.outer, s.n, s.inner});
    case kernel::ParamLayout::kPerGroup:
      return x.reshape({s.outer, s.num_groups, s.group, s.inner});
  }
  return x;
}

at::Tensor BroadcastParam(const at::Tensor& p, const kernel::KernelShape& s) {
  switch (s.layout) {
    case kernel::ParamLayout::kScalar:
      return p.reshape({});
    case kernel::ParamLayout::kPerChannel:
      return p.reshape({1, s.n, 1});
    case kernel::ParamLayout::kPerGroup:
      return p.reshape({s.outer, s.num_groups, 1, s.inner});
  }
  return p;
}

QParams ExpandGroupsToColumns(const QParams& qp, const at::Tensor& group_index, QuantSpec* spec) {
  const at::Tensor index = group_index.to(qp.scale.device(), at::kLong);
  spec->group_size = 1;
  QParams columns;
  columns.scale = qp.scale.index_select(1, index).contiguous();
  if (qp.zero_point.defined())
    columns.zero_point = qp.zero_point.index_select(1, index).contiguous();
  return columns;
}

}  // namespace quantd::quant
