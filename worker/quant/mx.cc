#include "worker/quant/mx.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "worker/quant/element_ops.h"
#include "worker/quant/fp8.h"
#include "worker/quant/kernel_args.h"

namespace quantd::quant::mx {
namespace {

using kernel::DispatchIo;
using kernel::In;
using kernel::KernelShape;
using kernel::Out;

using element::kFloatMax;
using element::kTiny;
using element::MxIntElementScale;
using element::ReciprocalIsExact;

bool IsMxInt(const QuantSpec& spec) { return spec.dtype == DataType::kMxInt8; }
bool SignedZero(const QuantSpec& spec) {
  return spec.dtype == DataType::kMxFp8E4M3 || spec.dtype == DataType::kMxFp8E5M2;
}

struct RefOp {
  MinifloatFormat f;
  bool mxint;
  bool signed_zero;
  QD_ALWAYS_INLINE float operator()(float x, float scale, float /*zp*/) const {
    if (!std::isfinite(x)) return x;
    if (mxint) {
      const float unit = MxIntElementScale(scale);
      const float q =
          std::fmin(std::fmax(std::nearbyint(x * (1.0f / unit)) + 0.0f, -127.0f), 127.0f);
      return q * unit;
    }
    return QuantizeToMinifloatRef(x / scale, f, signed_zero) * scale;
  }
};

struct CodeStoreU8 {
  using T = uint8_t;
  static uint8_t Store(float f) { return static_cast<uint8_t>(static_cast<int32_t>(f)); }
};

struct FpCodeOp {
  MinifloatFormat f;
  MinifloatKind kind;
  bool signed_zero;
  QD_ALWAYS_INLINE float operator()(float x, float /*inv*/, float scale, float /*zp*/) const {
    const float v = x / scale;
    const float q = std::isnan(v) ? v : QuantizeToMinifloat(v, f, signed_zero);
    return static_cast<float>(EncodeMinifloat(q, f, kind));
  }
};

struct IntCodeOp {
  QD_ALWAYS_INLINE float operator()(float x, float inv, float /*unit*/, float /*zp*/) const {
    if (x != x) return 0.0f;
    const float r = RoundHalfEven(ClampRoundInput(x * inv)) + 0.0f;
    return std::min(std::max(r, -127.0f), 127.0f);
  }
};

Status CheckMxSpec(const QuantSpec& spec) {
  if (!IsMxType(spec.dtype)) {
    return InvalidArgumentError("MX kernel called for " + std::string(DataTypeName(spec.dtype)));
  }
  return OkStatus();
}

// The kernel's (inv, scale) arrays for block scales: the block scale for FP
// elements, the MXINT8 element unit otherwise.
kernel::SlotArrays ElementParams(const std::vector<float>& block_scale, bool mxint) {
  kernel::SlotArrays a;
  const size_t n = block_scale.size();
  a.scale.resize(n);
  a.inv.resize(n);
  a.zp.assign(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    a.scale[i] = mxint ? MxIntElementScale(block_scale[i]) : block_scale[i];
    a.inv[i] = 1.0f / a.scale[i];
  }
  return a;
}

// Calls fn(op) with the fake-quantization op of the spec's element type;
// `exact_reciprocal` when every scale passes ReciprocalIsExact.
template <class Fn>
void WithFakeOp(const QuantSpec& spec, bool exact_reciprocal, const Fn& fn) {
  if (IsMxInt(spec)) {
    fn(element::MxIntOp{});
  } else if (exact_reciprocal) {
    fn(element::MxFpOp<true>{MinifloatFormatOf(spec.dtype), SignedZero(spec)});
  } else {
    fn(element::MxFpOp<false>{MinifloatFormatOf(spec.dtype), SignedZero(spec)});
  }
}

template <class Io>
QD_ALWAYS_INLINE float FiniteAbs(typename Io::T v) {
  return element::FiniteAbs(Io::Load(v));
}

// amax of the finite elements of a run. Non-negative floats order like their
// bit patterns, so the reduction runs on integers (which vectorises).
template <class Io>
QD_ALWAYS_INLINE float SpanAmax(const typename Io::T* x, int64_t len) {
  int32_t m = 0;
  for (int64_t j = 0; j < len; ++j) {
    m = std::max(m, static_cast<int32_t>(BitsOf(FiniteAbs<Io>(x[j]))));
  }
  return FloatOf(static_cast<uint32_t>(m));
}

// amax of the finite elements per block (shape s is per-group).
template <class Io>
void ReduceBlockAmax(const KernelShape& s, const typename Io::T* x, float* amax) {
  if (s.inner == 1) {
    const kernel::SpanList spans(s);
    kernel::ParallelSpans(spans, [&](const kernel::Span& sp) QD_LOOP_BODY {
      amax[sp.param_offset] = SpanAmax<Io>(x + sp.offset, sp.length);
    });
    return;
  }
  const int64_t slots = s.outer * s.num_groups;
  at::parallel_for(0, slots, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t o = k / s.num_groups;
      const int64_t g = k % s.num_groups;
      float* m = amax + k * s.inner;
      std::fill(m, m + s.inner, 0.0f);
      const int64_t c_end = std::min(s.n, (g + 1) * s.group);
      kernel::RunSimd([&]() QD_LOOP_BODY {
        for (int64_t c = g * s.group; c < c_end; ++c) {
          const typename Io::T* row = x + (o * s.n + c) * s.inner;
          for (int64_t i = 0; i < s.inner; ++i) m[i] = std::max(m[i], FiniteAbs<Io>(row[i]));
        }
      });
    }
  });
}

// Composed: x as [outer, G, 32, inner], the tail zero-padded.
at::Tensor PaddedBlocks(const at::Tensor& x, const KernelShape& s) {
  at::Tensor x3 = x.to(at::kFloat).reshape({s.outer, s.n, s.inner});
  const int64_t pad = s.num_groups * s.group - s.n;
  if (pad > 0) x3 = at::constant_pad_nd(x3, {0, 0, 0, pad}, 0.0);
  return x3.reshape({s.outer, s.num_groups, s.group, s.inner});
}

at::Tensor UnpadBlocks(const at::Tensor& y4, const KernelShape& s, at::IntArrayRef sizes) {
  return y4.reshape({s.outer, s.num_groups * s.group, s.inner}).slice(1, 0, s.n).reshape(sizes);
}

at::Tensor FiniteAbsComposed(const at::Tensor& x) {
  return at::where(at::isfinite(x), x.abs(), at::zeros({}, x.options()));
}

// Composed element op on padded blocks with broadcast block scales.
at::Tensor ElementsComposed(const at::Tensor& x4, const at::Tensor& scale, const QuantSpec& spec) {
  at::Tensor y;
  if (IsMxInt(spec)) {
    const at::Tensor unit = at::clamp_min(scale / at::full({}, 64.0, scale.options()), kTiny);
    const at::Tensor r = at::round(at::clamp(x4 * at::reciprocal(unit), -kRoundLimit, kRoundLimit));
    y = at::clamp(r + 0.0, -127.0, 127.0) * unit;
  } else {
    y = fp8::RoundToMinifloatComposed(x4 / scale, MinifloatFormatOf(spec.dtype), SignedZero(spec)) *
        scale;
  }
  return at::where(at::isfinite(x4), y, x4);
}

}  // namespace

float ScaleFromAmax(float amax, const QuantSpec& spec) {
  const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
  return Pow2Wide(MxScaleExponent(amax, spec.mx_scale_mode, f.mbits, f.emax));
}

at::Tensor ScaleFromAmaxComposed(const at::Tensor& amax_in, const QuantSpec& spec) {
  const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
  const at::Tensor amax = amax_in.to(at::kFloat).contiguous();
  auto full = [&](int v) { return at::full({}, v, amax.options().dtype(at::kInt)); };
  at::Tensor x;
  if (spec.mx_scale_mode == MxScaleMode::kEven) {
    const at::Tensor bits = amax.view(at::kInt);
    const at::Tensor rounded = at::bitwise_and(bits + (1 << (22 - f.mbits)), 0x7F800000);
    const at::Tensor field = at::div(rounded, 8388608, "trunc");
    x = at::clamp(field - 127 - f.emax, -127, 127);
    x = at::where(field.eq(0), full(-127), x);
    x = at::where(field.eq(255), full(127), x);
    x = at::where(amax.eq(0), full(std::max(-126 - f.emax, -127)), x);
  } else {
    auto [m, e] = at::frexp(amax);
    x = e - 1 - f.emax;
    if (spec.mx_scale_mode == MxScaleMode::kCeil) x = x + m.ne(0.5).to(at::kInt);
    x = at::where(amax.eq(0).logical_or(x.lt(-149)), full(-23), x);
    x = at::clamp_max(x, 127);
  }
  // 2^x for x in [-149, 127]: two exact powers of two (the second < 1 only
  // for subnormal scales).
  return fp8::Pow2Composed(at::clamp_min(x, -126)) * fp8::Pow2Composed(at::clamp_max(x + 126, 0));
}

StatusOr<at::Tensor> BlockAmaxFused(const at::Tensor& x, const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  at::Tensor amax = at::empty(ParamSizes(x.sizes().vec(), spec), at::kFloat);
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    ReduceBlockAmax<Io>(s, In<Io>(x), amax.data_ptr<float>());
  }));
  return amax;
}

StatusOr<at::Tensor> BlockAmaxComposed(const at::Tensor& x, const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  return FiniteAbsComposed(PaddedBlocks(x, s)).amax({2}).reshape(ParamSizes(x.sizes().vec(), spec));
}

Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                      at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(std::vector<float> scale, ParamArray(qp.scale, s.num_params(), "scale"));
  const kernel::SlotArrays a = ElementParams(scale, IsMxInt(spec));
  bool exact = true;
  for (float sc : scale) exact = exact && ReciprocalIsExact(sc);
  return DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    WithFakeOp(spec, exact, [&](const auto& op) {
      kernel::ApplyScaled<Io, Io>(s, In<Io>(x), Out<Io>(out), a.view(), op);
    });
  });
}

Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                    at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(std::vector<float> scale, ParamArray(qp.scale, s.num_params(), "scale"));
  const std::vector<float> zp(scale.size(), 0.0f);
  const RefOp op{MinifloatFormatOf(spec.dtype), IsMxInt(spec), SignedZero(spec)};
  return DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    kernel::ApplyScaledRef<Io, Io>(s, In<Io>(x), Out<Io>(out), scale.data(), zp.data(), op);
  });
}

StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(at::Tensor scale, kernel::ComposedParam(qp.scale, s, x.device(), "scale"));
  const at::Tensor y4 = ElementsComposed(PaddedBlocks(x, s), scale, spec);
  return UnpadBlocks(y4, s, x.sizes()).to(x.scalar_type());
}

StatusOr<QParams> FakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                        at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const std::vector<int64_t> psizes = ParamSizes(x.sizes().vec(), spec);
  if (s.inner != 1) {
    // Blocks across rows: reduce first, then quantize.
    QD_ASSIGN_OR_RETURN(at::Tensor amax, BlockAmaxFused(x, spec));
    QParams qp;
    qp.scale = at::empty(psizes, at::kFloat);
    const float* am = amax.data_ptr<float>();
    float* sc = qp.scale.data_ptr<float>();
    for (int64_t k = 0; k < amax.numel(); ++k) sc[k] = ScaleFromAmax(am[k], spec);
    QD_RETURN_IF_ERROR(FakeQuantFused(x, spec, qp, out));
    return qp;
  }
  // Blocks along the last axis: amax, scale and elements while the block is
  // in cache.
  QParams qp;
  qp.scale = at::empty(psizes, at::kFloat);
  float* scales = qp.scale.data_ptr<float>();
  const bool mxint = IsMxInt(spec);
  const kernel::SpanList spans(s);
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    const typename Io::T* xp = In<Io>(x);
    typename Io::T* yp = Out<Io>(out);
    auto quantize_span = [&](const auto& op, const typename Io::T* xs, typename Io::T* ys,
                             int64_t len, float scale) QD_LOOP_BODY {
      const float inv = 1.0f / scale;
      for (int64_t j = 0; j < len; ++j) ys[j] = Io::Store(op(Io::Load(xs[j]), inv, scale, 0.0f));
    };
    const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
    const bool signed_zero = SignedZero(spec);
    kernel::ParallelSpans(spans, [&](const kernel::Span& sp) QD_LOOP_BODY {
      const typename Io::T* xs = xp + sp.offset;
      typename Io::T* ys = yp + sp.offset;
      const float block_scale = ScaleFromAmax(SpanAmax<Io>(xs, sp.length), spec);
      scales[sp.param_offset] = block_scale;
      if (mxint) {
        quantize_span(element::MxIntOp{}, xs, ys, sp.length, MxIntElementScale(block_scale));
      } else if (ReciprocalIsExact(block_scale)) {
        quantize_span(element::MxFpOp<true>{f, signed_zero}, xs, ys, sp.length, block_scale);
      } else {
        quantize_span(element::MxFpOp<false>{f, signed_zero}, xs, ys, sp.length, block_scale);
      }
    });
  }));
  return qp;
}

StatusOr<std::pair<at::Tensor, QParams>> FakeQuantDynamicComposed(const at::Tensor& x,
                                                                  const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  const at::Tensor x4 = PaddedBlocks(x, s);
  const at::Tensor scale = ScaleFromAmaxComposed(FiniteAbsComposed(x4).amax({2}, true), spec);
  const at::Tensor y = UnpadBlocks(ElementsComposed(x4, scale, spec), s, x.sizes());
  QParams qp;
  qp.scale = scale.reshape(ParamSizes(x.sizes().vec(), spec));
  return std::make_pair(y.to(x.scalar_type()), qp);
}

StatusOr<at::Tensor> QuantizeFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, x));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(std::vector<float> scale, ParamArray(qp.scale, s.num_params(), "scale"));
  const bool mxint = IsMxInt(spec);
  const kernel::SlotArrays a = ElementParams(scale, mxint);
  at::Tensor codes = at::empty(x.sizes(), mxint ? at::kChar : at::kByte);
  QD_RETURN_IF_ERROR(DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    if (mxint) {
      kernel::ApplyScaled<Io, kernel::IoInt8>(s, In<Io>(x), codes.data_ptr<int8_t>(), a.view(),
                                              IntCodeOp{});
    } else {
      const FpCodeOp op{MinifloatFormatOf(spec.dtype), fp8::KindOf(spec.dtype), SignedZero(spec)};
      kernel::ApplyScaled<Io, CodeStoreU8>(s, In<Io>(x), codes.data_ptr<uint8_t>(), a.view(), op);
    }
  }));
  return codes;
}

StatusOr<at::Tensor> QuantizeComposed(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(x.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(at::Tensor scale, kernel::ComposedParam(qp.scale, s, x.device(), "scale"));
  const at::Tensor x4 = PaddedBlocks(x, s);
  if (IsMxInt(spec)) {
    const at::Tensor unit = at::clamp_min(scale / at::full({}, 64.0, scale.options()), kTiny);
    const at::Tensor r = at::round(at::clamp(x4 * at::reciprocal(unit), -kRoundLimit, kRoundLimit));
    at::Tensor q = at::clamp(r + 0.0, -127.0, 127.0);
    q = at::where(at::isnan(x4), at::zeros({}, q.options()), q);
    return UnpadBlocks(q, s, x.sizes()).to(at::kChar);
  }
  const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
  const at::Tensor v = x4 / scale;
  const at::Tensor nan = at::full({}, std::numeric_limits<float>::quiet_NaN(), v.options());
  const at::Tensor q =
      at::where(at::isnan(v), nan, fp8::RoundToMinifloatComposed(v, f, SignedZero(spec)));
  return UnpadBlocks(fp8::EncodeMinifloatComposed(q, f, fp8::KindOf(spec.dtype)), s, x.sizes());
}

StatusOr<at::Tensor> DequantizeCodes(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp) {
  QD_RETURN_IF_ERROR(CheckMxSpec(spec));
  QD_ASSIGN_OR_RETURN(KernelShape s, KernelShapeFor(codes.sizes().vec(), spec));
  QD_ASSIGN_OR_RETURN(at::Tensor scale,
                      kernel::ComposedParam(qp.scale, s, codes.device(), "scale"));
  at::Tensor values;
  if (IsMxInt(spec)) {
    const at::Tensor unit = at::clamp_min(scale / at::full({}, 64.0, scale.options()), kTiny);
    return UnpadBlocks(PaddedBlocks(codes, s) * unit, s, codes.sizes());
  }
  const MinifloatFormat f = MinifloatFormatOf(spec.dtype);
  std::vector<float> table(256);
  for (int c = 0; c < 256; ++c) {
    table[c] = DecodeMinifloat(static_cast<uint8_t>(c), f, fp8::KindOf(spec.dtype));
  }
  const at::Tensor lut = at::from_blob(table.data(), {256}, at::kFloat).to(codes.device());
  values = lut.index_select(0, codes.reshape({-1}).to(at::kLong)).reshape(codes.sizes());
  return UnpadBlocks(PaddedBlocks(values, s) * scale, s, codes.sizes());
}

at::Tensor E8M0Codes(const at::Tensor& scale) {
  auto [m, e] = at::frexp(scale.to(at::kFloat));
  return at::clamp(e - 1 + 127, 0, 254).to(at::kByte);
}

}  // namespace quantd::quant::mx
