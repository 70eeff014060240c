#include "worker/quant/int_quant.h"

#include <cmath>
#include <string>
#include <vector>

#include "worker/quant/element_ops.h"
#include "worker/quant/float_bits.h"
#include "worker/quant/kernel_args.h"

namespace quantd::quant::int_quant {
namespace {

using kernel::DispatchIo;
using kernel::In;
using kernel::KernelShape;
using kernel::Out;
using kernel::SlotArrays;

// The reference element operation, written the obvious way.
struct RefOp {
  float qmin;
  float qmax;
  RoundMethod round;
  bool float_zp;
  QD_ALWAYS_INLINE float operator()(float x, float scale, float zp) const {
    if (std::isnan(x)) return x;
    const float inv_scale = 1.0f / scale;
    const float r =
        float_zp ? RoundByRef(x * inv_scale + zp, round) : RoundByRef(x * inv_scale, round) + zp;
    const float q = std::fmin(std::fmax(r, qmin), qmax);
    return (q - zp) * scale;
  }
};

bool HasFloatZeroPoint(const QuantSpec& spec) {
  return !spec.symmetric && spec.zero_point_type == ZeroPointType::kFloat32;
}

// Calls fn(op) with the fused op for the spec's round method and zero point.
template <template <RoundMethod, bool> class OpT, bool kFloatZp, class Fn>
void WithRoundMethodAndZp(const QuantSpec& spec, const Fn& fn) {
  const IntRange range = IntRangeOf(spec.dtype);
  const float qmin = static_cast<float>(range.qmin);
  const float qmax = static_cast<float>(range.qmax);
  switch (spec.round_method) {
    case RoundMethod::kHalfEven:
      fn(OpT<RoundMethod::kHalfEven, kFloatZp>{qmin, qmax});
      return;
    case RoundMethod::kRound:
      fn(OpT<RoundMethod::kRound, kFloatZp>{qmin, qmax});
      return;
    case RoundMethod::kFloor:
      fn(OpT<RoundMethod::kFloor, kFloatZp>{qmin, qmax});
      return;
  }
}

template <template <RoundMethod, bool> class OpT, class Fn>
void WithRoundMethod(const QuantSpec& spec, const Fn& fn) {
  if (HasFloatZeroPoint(spec)) {
    WithRoundMethodAndZp<OpT, true>(spec, fn);
  } else {
    WithRoundMethodAndZp<OpT, false>(spec, fn);
  }
}

Status CheckIntSpec(const QuantSpec& spec) {
  if (!IsIntType(spec.dtype)) {
    return InvalidArgumentError("integer kernel called for " +
                                std::string(DataTypeName(spec.dtype)));
  }
  return OkStatus();
}

// The composed-ATen twin of the fused op on KernelView-shaped float tensors.
at::Tensor ComposedCodes(const at::Tensor& xf, const at::Tensor& scale, const at::Tensor& zp,
                         const QuantSpec& spec) {
  const IntRange range = IntRangeOf(spec.dtype);
  at::Tensor v = xf * at::reciprocal(scale);
  if (HasFloatZeroPoint(spec)) v = v + zp;
  v = at::clamp(v, -kRoundLimit, kRoundLimit);
  at::Tensor r;
  switch (spec.round_method) {
    case RoundMethod::kHalfEven:
      r = at::round(v);
      break;
    case RoundMethod::kRound:
      r = at::copysign(at::floor(at::abs(v) + 0.5), v);
      break;
    case RoundMethod::kFloor:
      r = at::floor(v);
      break;
  }
  if (!HasFloatZeroPoint(spec)) r = r + zp;
  return at::clamp(r, static_cast<double>(range.qmin), static_cast<double>(range.qmax));
}

struct ComposedParams {
  KernelShape shape;
  at::Tensor scale;  // broadcastable, float32, on x's device
  at::Tensor zp;
};

StatusOr<ComposedParams> PrepareComposed(const at::Tensor& x, const QuantSpec& spec,
                                         const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  ComposedParams p;
  QD_ASSIGN_OR_RETURN(p.shape, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(p.scale, kernel::ComposedParam(qp.scale, p.shape, x.device(), "scale"));
  QD_ASSIGN_OR_RETURN(p.zp,
                      kernel::ComposedParam(qp.zero_point, p.shape, x.device(), "zero_point"));
  return p;
}

}  // namespace

Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                      at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(SlotArrays a, kernel::SlotArraysOf(qp, s.num_params(), true));
  return DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    WithRoundMethod<element::IntFakeQuantOp>(spec, [&](const auto& op) {
      kernel::ApplyScaled<Io, Io>(s, In<Io>(x), Out<Io>(out), a.view(), op);
    });
  });
}

Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                    at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(SlotArrays a, kernel::SlotArraysOf(qp, s.num_params(), true));
  const IntRange range = IntRangeOf(spec.dtype);
  const RefOp op{static_cast<float>(range.qmin), static_cast<float>(range.qmax), spec.round_method,
                 HasFloatZeroPoint(spec)};
  return DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ApplyScaledRef<Io, Io>(s, In<Io>(x), Out<Io>(out), a.scale.data(), a.zp.data(), op);
  });
}

StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp) {
  QD_ASSIGN_OR_RETURN(ComposedParams p, PrepareComposed(x, spec, qp));
  const at::Tensor xf = KernelView(x.to(at::kFloat), p.shape);
  const at::Tensor q = ComposedCodes(xf, p.scale, p.zp, spec);
  const at::Tensor y = at::where(at::isnan(xf), xf, (q - p.zp) * p.scale);
  return y.reshape(x.sizes()).to(x.scalar_type());
}

StatusOr<QParams> FakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                        at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const std::vector<int64_t> psizes = ParamSizes(x.sizes().vec(), spec);
  const IntQParamConsts consts = IntConstsFor(spec, x.scalar_type());
  const int64_t n = s.num_params();
  std::vector<float> scale(n, 1.0f);
  std::vector<float> zp(n, 0.0f);
  if (kernel::SpanList(s).OneSpanPerParam()) {
    auto make = [&](float mn, float mx, float* sc, float* z) {
      const ScaleZeroPoint p = IntQParamsFromMinMax(mn, mx, consts);
      *sc = p.scale;
      *z = p.zero_point;
    };
    QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
      using Io = decltype(io);
      WithRoundMethod<element::IntFakeQuantOp>(spec, [&](const auto& op) {
        kernel::ApplyScaledDynamicOnePass<Io, Io>(s, In<Io>(x), Out<Io>(out), scale.data(),
                                                  zp.data(), op, make);
      });
    }));
    return MakeQParams(psizes, scale, &zp, consts.float_zero_point);
  }
  QD_ASSIGN_OR_RETURN(QParams qp, MinMaxQParamsFused(x, spec));
  QD_RETURN_IF_ERROR(FakeQuantFused(x, spec, qp, out));
  return qp;
}

StatusOr<std::pair<at::Tensor, QParams>> FakeQuantDynamicComposed(const at::Tensor& x,
                                                                  const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  QD_ASSIGN_OR_RETURN(auto mm, MinMaxComposed(x, spec));
  QD_ASSIGN_OR_RETURN(QParams qp, QParamsFromMinMax(mm.first, mm.second, spec, x.scalar_type()));
  QD_ASSIGN_OR_RETURN(at::Tensor y, FakeQuantComposed(x, spec, qp));
  return std::make_pair(y, qp);
}

StatusOr<QParams> MinMaxQParamsFused(const at::Tensor& x, const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const int64_t n = s.num_params();
  std::vector<float> mn(n), mx(n), scale(n), zp(n);
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ReduceMinMax<Io>(s, In<Io>(x), mn.data(), mx.data());
  }));
  QParamsFromMinMaxArrays(mn.data(), mx.data(), n, spec, x.scalar_type(), scale.data(), zp.data());
  const bool float_zp = !spec.symmetric && spec.zero_point_type == ZeroPointType::kFloat32;
  return MakeQParams(ParamSizes(x.sizes().vec(), spec), scale, &zp, float_zp);
}

StatusOr<at::Tensor> QuantizeFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckIntSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(SlotArrays a, kernel::SlotArraysOf(qp, s.num_params(), true));
  const bool is_signed = IsSignedInt(spec.dtype);
  at::Tensor codes = at::empty(x.sizes(), is_signed ? at::kChar : at::kByte);
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    WithRoundMethod<element::IntCodeOp>(spec, [&](const auto& op) {
      if (is_signed) {
        kernel::ApplyScaled<Io, kernel::IoInt8>(s, In<Io>(x), codes.data_ptr<int8_t>(), a.view(),
                                                op);
      } else {
        kernel::ApplyScaled<Io, kernel::IoUInt8>(s, In<Io>(x), codes.data_ptr<uint8_t>(), a.view(),
                                                 op);
      }
    });
  }));
  return codes;
}

StatusOr<at::Tensor> QuantizeComposed(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp) {
  QD_ASSIGN_OR_RETURN(ComposedParams p, PrepareComposed(x, spec, qp));
  const at::Tensor xf = KernelView(x.to(at::kFloat), p.shape);
  const at::Tensor q = ComposedCodes(xf, p.scale, p.zp, spec);
  return q.reshape(x.sizes()).to(IsSignedInt(spec.dtype) ? at::kChar : at::kByte);
}

StatusOr<at::Tensor> DequantizeCodes(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp) {
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(codes.sizes().vec(), spec));
  if (!qp.scale.defined() || qp.scale.numel() != s.num_params() || !qp.zero_point.defined() ||
      qp.zero_point.numel() != s.num_params()) {
    return InvalidArgumentError("Dequantize: scale / zero_point do not match the codes");
  }
  const at::Tensor q = KernelView(codes.to(at::kFloat), s);
  const at::Tensor scale = BroadcastParam(qp.scale.to(codes.device()).to(at::kFloat), s);
  const at::Tensor zp = BroadcastParam(qp.zero_point.to(codes.device()).to(at::kFloat), s);
  return ((q - zp) * scale).reshape(codes.sizes());
}

float FakeQuantScalar(float x, float scale, float zero_point, const QuantSpec& spec) {
  const IntRange range = IntRangeOf(spec.dtype);
  return RefOp{static_cast<float>(range.qmin), static_cast<float>(range.qmax), spec.round_method,
               HasFloatZeroPoint(spec)}(x, scale, zero_point);
}

}  // namespace quantd::quant::int_quant
