#include "worker/quant/fp8.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "worker/quant/element_ops.h"
#include "worker/quant/format_table.h"
#include "worker/quant/kernel_args.h"

namespace quantd::quant::fp8 {
namespace {

using kernel::DispatchIo;
using kernel::In;
using kernel::KernelShape;
using kernel::Out;
using kernel::SlotArrays;

constexpr float kFloatMax = std::numeric_limits<float>::max();

struct CodeOp {
  MinifloatFormat f;
  MinifloatKind kind;
  QD_ALWAYS_INLINE float operator()(float x, float /*inv_scale*/, float scale, float /*zp*/) const {
    const float v = x / scale;
    const float q = std::isnan(v) ? v : QuantizeToMinifloat(v, f, /*signed_zero=*/true);
    return static_cast<float>(EncodeMinifloat(q, f, kind));
  }
};

struct RefOp {
  MinifloatFormat f;
  QD_ALWAYS_INLINE float operator()(float x, float scale, float /*zp*/) const {
    if (!std::isfinite(x)) return x;
    return QuantizeToMinifloatRef(x / scale, f, /*signed_zero=*/true) * scale;
  }
};

Status CheckFp8Spec(const QuantSpec& spec) {
  if (!IsFp8Type(spec.dtype)) {
    return InvalidArgumentError("FP8 kernel called for " + std::string(DataTypeName(spec.dtype)));
  }
  return OkStatus();
}

struct CodeStore {
  using T = uint8_t;
  static uint8_t Store(float f) { return static_cast<uint8_t>(static_cast<int32_t>(f)); }
};

}  // namespace

at::Tensor Pow2Composed(const at::Tensor& k) {
  return ((k + 127) * 8388608).to(at::kInt).view(at::kFloat);
}

MinifloatKind KindOf(DataType t) { return FormatOf(t).minifloat_kind; }

at::Tensor RoundToMinifloatComposed(const at::Tensor& v, const MinifloatFormat& f,
                                    bool signed_zero) {
  const at::Tensor a = at::clamp_max(v.abs(), f.max_norm);
  auto [mant, e] = at::frexp(a);
  const at::Tensor exp = at::clamp_min(e - 1, 1 - f.bias);
  const at::Tensor up = Pow2Composed(f.mbits - exp);
  const at::Tensor down = Pow2Composed(exp - f.mbits);
  const at::Tensor m = at::clamp_max(at::round(a * up) * down, f.max_norm);
  const at::Tensor s = at::copysign(m, v);
  if (signed_zero) return s;
  return at::where(m.eq(0), at::zeros({}, m.options()), s);
}

at::Tensor EncodeMinifloatComposed(const at::Tensor& q, const MinifloatFormat& f,
                                   MinifloatKind kind) {
  // sign | exponent field | mantissa, from frexp of |q|.
  const at::Tensor a = q.abs();
  auto [mant, e] = at::frexp(a);
  const int emin = 1 - f.bias;
  const at::Tensor normal = (e - 1).ge(emin).logical_and(a.gt(0));
  const at::Tensor field = at::where(normal, e - 1 + f.bias, at::zeros_like(e));
  const at::Tensor exp = at::clamp_min(e - 1, emin);
  const at::Tensor scaled = at::round(a * Pow2Composed(f.mbits - exp)).to(at::kInt);
  const at::Tensor mantissa = at::where(normal, scaled - (1 << f.mbits), scaled);
  at::Tensor bits = field * (1 << f.mbits) + mantissa;
  bits = at::where(at::signbit(q), bits + (1 << (f.ebits + f.mbits)), bits);
  const int nan_code = kind == MinifloatKind::kFinite ? 0 : 0x7F;
  bits = at::where(at::isnan(q), at::full_like(bits, nan_code), bits);
  return bits.to(at::kByte);
}

Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                      at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(SlotArrays a, kernel::SlotArraysOf(qp, s.num_params(), false));
  const element::Fp8FakeQuantOp op{MinifloatFormatOf(spec.dtype)};
  return DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ApplyScaled<Io, Io>(s, In<Io>(x), Out<Io>(out), a.view(), op);
  });
}

Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                    at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(SlotArrays a, kernel::SlotArraysOf(qp, s.num_params(), false));
  const RefOp op{MinifloatFormatOf(spec.dtype)};
  return DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ApplyScaledRef<Io, Io>(s, In<Io>(x), Out<Io>(out), a.scale.data(), a.zp.data(), op);
  });
}

StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(at::Tensor scale, kernel::ComposedParam(qp.scale, s, x.device(), "scale"));
  const at::Tensor xf = KernelView(x.to(at::kFloat), s);
  const at::Tensor q = RoundToMinifloatComposed(xf / scale, MinifloatFormatOf(spec.dtype), true);
  const at::Tensor y = at::where(at::isfinite(xf), q * scale, xf);
  return y.reshape(x.sizes()).to(x.scalar_type());
}

StatusOr<QParams> MinMaxQParamsFused(const at::Tensor& x, const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const int64_t n = s.num_params();
  std::vector<float> mn(n), mx(n), scale(n), unused(n);
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ReduceMinMax<Io>(s, In<Io>(x), mn.data(), mx.data());
  }));
  QParamsFromMinMaxArrays(mn.data(), mx.data(), n, spec, x.scalar_type(), scale.data(),
                          unused.data());
  return MakeQParams(ParamSizes(x.sizes().vec(), spec), scale, nullptr, false);
}

StatusOr<QParams> FakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                        at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  if (kernel::SpanList(s).OneSpanPerParam()) {
    const int64_t n = s.num_params();
    std::vector<float> scale(n, 1.0f), zp(n, 0.0f);
    const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
    const ScaleRounding r = ScaleRoundingFor(spec, x.scalar_type());
    auto make = [&](float mn, float mx, float* sc, float* z) {
      *sc = Fp8ScaleFromMinMax(mn, mx, f.max_norm, r);
      *z = 0.0f;
    };
    QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
      using Io = decltype(io);
      kernel::ApplyScaledDynamicOnePass<Io, Io>(s, In<Io>(x), Out<Io>(out), scale.data(), zp.data(),
                                                element::Fp8FakeQuantOp{f}, make);
    }));
    return MakeQParams(ParamSizes(x.sizes().vec(), spec), scale, nullptr, false);
  }
  QD_ASSIGN_OR_RETURN(QParams qp, MinMaxQParamsFused(x, spec));
  QD_RETURN_IF_ERROR(FakeQuantFused(x, spec, qp, out));
  return qp;
}

StatusOr<std::pair<at::Tensor, QParams>> FakeQuantDynamicComposed(const at::Tensor& x,
                                                                  const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_ASSIGN_OR_RETURN(auto mm, MinMaxComposed(x, spec));
  QD_ASSIGN_OR_RETURN(QParams qp, QParamsFromMinMax(mm.first, mm.second, spec, x.scalar_type()));
  QD_ASSIGN_OR_RETURN(at::Tensor y, FakeQuantComposed(x, spec, qp));
  return std::make_pair(y, qp);
}

StatusOr<at::Tensor> QuantizeFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(SlotArrays a, kernel::SlotArraysOf(qp, s.num_params(), false));
  at::Tensor codes = at::empty(x.sizes(), at::kByte);
  const CodeOp op{MinifloatFormatOf(spec.dtype), KindOf(spec.dtype)};
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ApplyScaled<Io, CodeStore>(s, In<Io>(x), codes.data_ptr<uint8_t>(), a.view(), op);
  }));
  return codes;
}

StatusOr<at::Tensor> QuantizeComposed(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(at::Tensor scale, kernel::ComposedParam(qp.scale, s, x.device(), "scale"));
  const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
  const at::Tensor v = KernelView(x.to(at::kFloat), s) / scale;
  const at::Tensor q = RoundToMinifloatComposed(v, f, true);
  const at::Tensor nan = at::full({}, std::numeric_limits<float>::quiet_NaN(), q.options());
  return EncodeMinifloatComposed(at::where(at::isnan(v), nan, q), f, KindOf(spec.dtype))
      .reshape(x.sizes());
}

StatusOr<at::Tensor> DequantizeCodes(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckFp8Spec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(codes.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(at::Tensor scale,
                      kernel::ComposedParam(qp.scale, s, codes.device(), "scale"));
  // A 256-entry table of the format's values, indexed by the codes.
  const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
  std::vector<float> table(256);
  for (int c = 0; c < 256; ++c)
    table[c] = DecodeMinifloat(static_cast<uint8_t>(c), f, KindOf(spec.dtype));
  const at::Tensor lut = at::from_blob(table.data(), {256}, at::kFloat).to(codes.device());
  const at::Tensor values = lut.index_select(0, codes.reshape({-1}).to(at::kLong));
  return (KernelView(values, s) * scale).reshape(codes.sizes());
}

float FakeQuantScalar(float x, float scale, const QuantSpec& spec) {
  return RefOp{MinifloatFormatOf(spec.dtype)}(x, scale, 0.0f);
}

}  // namespace quantd::quant::fp8
