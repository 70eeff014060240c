#include "worker/quant/fake_quant.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "worker/quant/cast.h"
#if defined(QUANTD_CUDA_KERNELS)
#include "worker/quant/cuda/fake_quant_cuda.h"
#endif
#include "worker/quant/fp8.h"
#include "worker/quant/int_quant.h"
#include "worker/quant/mx.h"
#include "worker/quant/observer.h"

namespace quantd::quant {
namespace {

// Catches LibTorch exceptions at the public boundary.
template <class Fn>
auto Guarded(const char* what, const Fn& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return InvalidArgumentError(std::string(what) + ": " + e.what_without_backtrace())
        .WithReason("QUANTIZATION_FAILED");
  } catch (const std::exception& e) {
    return InternalError(std::string(what) + ": " + e.what());
  }
}

Status CheckInput(const at::Tensor& x) {
  if (!x.defined()) return InvalidArgumentError("quantization input is undefined");
  const at::ScalarType t = x.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) {
    return InvalidArgumentError(std::string("quantization input must be float32, float16 or "
                                            "bfloat16; got ") +
                                c10::toString(t));
  }
  return OkStatus();
}

// The tensor fits the spec (axis in range, whole groups); casts always fit.
Status CheckShape(const at::Tensor& x, const QuantSpec& spec) {
  if (IsCastType(spec.dtype)) return OkStatus();
  return KernelShapeFor(x.sizes().vec(), spec).status();
}

enum class Impl { kFused, kComposed, kReference };

StatusOr<Impl> ChooseImpl(const at::Tensor& x, const FakeQuantOptions& options) {
  const bool cpu = x.device().is_cpu();
  switch (options.path) {
    case KernelPath::kAuto:
      return cpu ? Impl::kFused : Impl::kComposed;
    case KernelPath::kComposed:
      return Impl::kComposed;
    case KernelPath::kFused:
    case KernelPath::kReference:
      if (!cpu) {
        return FailedPreconditionError(
            "the fused and reference kernels run on CPU tensors; use "
            "the composed path (or kAuto) for " +
            x.device().str());
      }
      return options.path == KernelPath::kFused ? Impl::kFused : Impl::kReference;
  }
  return Impl::kComposed;
}

// The families of formats; each has its own kernel file.
// The fused CUDA kernels take a CUDA tensor on the kAuto path when this
// build has them (CMake against a CUDA LibTorch defines
// QUANTD_CUDA_KERNELS); otherwise a GPU runs the composed path.
bool UseCudaKernels(const at::Tensor& x, const QuantSpec& spec, const FakeQuantOptions& options) {
#if defined(QUANTD_CUDA_KERNELS)
  return options.path == KernelPath::kAuto && cuda::Supports(x, spec);
#else
  (void)x, (void)spec, (void)options;
  return false;
#endif
}

StatusOr<at::Tensor> CudaFakeQuantize(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp, QParams* used) {
#if defined(QUANTD_CUDA_KERNELS)
  return cuda::FakeQuantize(x, spec, qp, used);
#else
  (void)x, (void)spec, (void)qp, (void)used;
  return FailedPreconditionError("this build has no CUDA fake-quant kernels");
#endif
}

enum class Family { kInt, kFp8, kMx, kCast };

Family FamilyOf(const QuantSpec& spec) {
  if (IsIntType(spec.dtype)) return Family::kInt;
  if (IsFp8Type(spec.dtype)) return Family::kFp8;
  if (IsMxType(spec.dtype)) return Family::kMx;
  return Family::kCast;
}

// Parameters for an empty tensor: neutral values in the QParams shapes.
QParams EmptyQParams(const at::Tensor& x, const QuantSpec& spec) {
  QParams qp;
  if (IsCastType(spec.dtype)) return qp;
  const std::vector<int64_t> sizes = ParamSizes(x.sizes().vec(), spec);
  qp.scale = at::ones(sizes, at::kFloat);
  if (IsIntType(spec.dtype)) qp.zero_point = at::zeros(sizes, at::kInt);
  return qp;
}

at::Tensor EmptyLike(const at::Tensor& x) {
  return at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
}

// Min-max parameters of an integer or FP8 spec.
StatusOr<QParams> MinMaxQParams(const at::Tensor& x, const QuantSpec& spec, Impl impl) {
  if (impl == Impl::kComposed) {
    QD_ASSIGN_OR_RETURN(auto mm, MinMaxComposed(x, spec));
    return QParamsFromMinMax(mm.first, mm.second, spec, x.scalar_type());
  }
  const at::Tensor xc = x.contiguous();
  if (IsIntType(spec.dtype)) return int_quant::MinMaxQParamsFused(xc, spec);
  return fp8::MinMaxQParamsFused(xc, spec);
}

StatusOr<QParams> MxBlockScales(const at::Tensor& x, const QuantSpec& spec, Impl impl) {
  QParams qp;
  if (impl == Impl::kComposed) {
    QD_ASSIGN_OR_RETURN(at::Tensor amax, mx::BlockAmaxComposed(x, spec));
    qp.scale = mx::ScaleFromAmaxComposed(amax, spec);
    return qp;
  }
  QD_ASSIGN_OR_RETURN(at::Tensor amax, mx::BlockAmaxFused(x.contiguous(), spec));
  qp.scale = at::empty_like(amax);
  const float* am = amax.data_ptr<float>();
  float* sc = qp.scale.data_ptr<float>();
  for (int64_t k = 0; k < amax.numel(); ++k) sc[k] = mx::ScaleFromAmax(am[k], spec);
  return qp;
}

// Percentile / MSE parameters of x alone: one batch through the observer.
StatusOr<QParams> HistogramQParams(const at::Tensor& x, const QuantSpec& spec) {
  QD_ASSIGN_OR_RETURN(std::unique_ptr<Observer> observer, Observer::Create(spec));
  QD_RETURN_IF_ERROR(observer->Observe(x));
  QD_ASSIGN_OR_RETURN(QParams qp, observer->ComputeQParams());
  qp.scale = qp.scale.to(x.device());
  if (qp.zero_point.defined()) qp.zero_point = qp.zero_point.to(x.device());
  return qp;
}

}  // namespace

StatusOr<QParams> ComputeQParams(const at::Tensor& x, const QuantSpec& spec,
                                 const FakeQuantOptions& options) {
  return Guarded("ComputeQParams", [&]() -> StatusOr<QParams> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    if (IsCastType(spec.dtype)) return QParams();
    QD_RETURN_IF_ERROR(CheckShape(x, spec));
    if (x.numel() == 0) return EmptyQParams(x, spec);
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    switch (FamilyOf(spec)) {
      case Family::kInt:
      case Family::kFp8:
        if (spec.observer != ObserverType::kMinMax) return HistogramQParams(x, spec);
        return MinMaxQParams(x, spec, impl);
      case Family::kMx:
        return MxBlockScales(x, spec, impl);
      case Family::kCast:
        return QParams();
    }
    return QParams();
  });
}

Status FakeQuantizeInto(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                        at::Tensor& out, const FakeQuantOptions& options) {
  return Guarded("FakeQuantizeInto", [&]() -> Status {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (impl == Impl::kComposed) {
      return InvalidArgumentError("FakeQuantizeInto runs the CPU kernels; use FakeQuantize");
    }
    QD_RETURN_IF_ERROR(CheckShape(x, spec));
    if (x.numel() == 0) return OkStatus();
    const at::Tensor xc = x.contiguous();
    const bool fused = impl == Impl::kFused;
    switch (FamilyOf(spec)) {
      case Family::kInt:
        return fused ? int_quant::FakeQuantFused(xc, spec, qp, out)
                     : int_quant::FakeQuantRef(xc, spec, qp, out);
      case Family::kFp8:
        return fused ? fp8::FakeQuantFused(xc, spec, qp, out)
                     : fp8::FakeQuantRef(xc, spec, qp, out);
      case Family::kMx: {
        if (!qp.scale.defined()) {
          QD_ASSIGN_OR_RETURN(QParams blocks, MxBlockScales(xc, spec, impl));
          return fused ? mx::FakeQuantFused(xc, spec, blocks, out)
                       : mx::FakeQuantRef(xc, spec, blocks, out);
        }
        return fused ? mx::FakeQuantFused(xc, spec, qp, out) : mx::FakeQuantRef(xc, spec, qp, out);
      }
      case Family::kCast:
        return fused ? cast::FakeQuantFused(xc, spec, out) : cast::FakeQuantRef(xc, spec, out);
    }
    return InternalError("unknown format family");
  });
}

StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                                  const FakeQuantOptions& options) {
  return Guarded("FakeQuantize", [&]() -> StatusOr<at::Tensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (impl != Impl::kComposed) {
      at::Tensor out = EmptyLike(x);
      QD_RETURN_IF_ERROR(FakeQuantizeInto(x, spec, qp, out, options));
      return out;
    }
    QD_RETURN_IF_ERROR(CheckShape(x, spec));
    if (x.numel() == 0) return x.clone();
    if (UseCudaKernels(x, spec, options)) return CudaFakeQuantize(x, spec, qp, nullptr);
    switch (FamilyOf(spec)) {
      case Family::kInt:
        return int_quant::FakeQuantComposed(x, spec, qp);
      case Family::kFp8:
        return fp8::FakeQuantComposed(x, spec, qp);
      case Family::kMx: {
        if (!qp.scale.defined()) {
          QD_ASSIGN_OR_RETURN(auto yq, mx::FakeQuantDynamicComposed(x, spec));
          return yq.first;
        }
        return mx::FakeQuantComposed(x, spec, qp);
      }
      case Family::kCast:
        return cast::FakeQuantComposed(x, spec);
    }
    return InternalError("unknown format family");
  });
}

Status FakeQuantizeDynamicInto(const at::Tensor& x, const QuantSpec& spec, at::Tensor& out,
                               const FakeQuantOptions& options, QParams* used) {
  return Guarded("FakeQuantizeDynamicInto", [&]() -> Status {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (impl == Impl::kComposed) {
      return InvalidArgumentError(
          "FakeQuantizeDynamicInto runs the CPU kernels; use "
          "FakeQuantizeDynamic");
    }
    QD_RETURN_IF_ERROR(CheckShape(x, spec));
    if (x.numel() == 0) {
      if (used != nullptr) *used = EmptyQParams(x, spec);
      return OkStatus();
    }
    const at::Tensor xc = x.contiguous();
    const Family family = FamilyOf(spec);
    QParams qp;
    if (family == Family::kCast) {
      QD_RETURN_IF_ERROR(FakeQuantizeInto(xc, spec, qp, out, options));
    } else if (impl == Impl::kReference) {
      // Reference: parameters from the separate reduction, then the scalar
      // element loop.
      QD_ASSIGN_OR_RETURN(qp, ComputeQParams(xc, spec, options));
      QD_RETURN_IF_ERROR(FakeQuantizeInto(xc, spec, qp, out, options));
    } else if (family == Family::kInt) {
      QD_ASSIGN_OR_RETURN(qp, int_quant::FakeQuantDynamicFused(xc, spec, out));
    } else if (family == Family::kFp8) {
      QD_ASSIGN_OR_RETURN(qp, fp8::FakeQuantDynamicFused(xc, spec, out));
    } else {
      QD_ASSIGN_OR_RETURN(qp, mx::FakeQuantDynamicFused(xc, spec, out));
    }
    if (used != nullptr) *used = qp;
    return OkStatus();
  });
}

StatusOr<at::Tensor> FakeQuantizeDynamic(const at::Tensor& x, const QuantSpec& spec,
                                         const FakeQuantOptions& options, QParams* used) {
  return Guarded("FakeQuantizeDynamic", [&]() -> StatusOr<at::Tensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (impl != Impl::kComposed) {
      at::Tensor out = EmptyLike(x);
      QD_RETURN_IF_ERROR(FakeQuantizeDynamicInto(x, spec, out, options, used));
      return out;
    }
    QD_RETURN_IF_ERROR(CheckShape(x, spec));
    if (x.numel() == 0) {
      if (used != nullptr) *used = EmptyQParams(x, spec);
      return x.clone();
    }
    if (UseCudaKernels(x, spec, options)) {
      // Integers and FP8: the slot parameters from a composed min / max
      // (bit-identical to the CPU's), then the kernel; MX: all in the kernel.
      QParams qp;
      if (!IsMxType(spec.dtype)) {
        QD_ASSIGN_OR_RETURN(auto mm, MinMaxComposed(x, spec));
        QD_ASSIGN_OR_RETURN(qp, QParamsFromMinMax(mm.first, mm.second, spec, x.scalar_type()));
      }
      return CudaFakeQuantize(x, spec, qp, used);
    }
    std::pair<at::Tensor, QParams> result;
    switch (FamilyOf(spec)) {
      case Family::kCast: {
        QD_ASSIGN_OR_RETURN(result.first, cast::FakeQuantComposed(x, spec));
        break;
      }
      case Family::kInt: {
        QD_ASSIGN_OR_RETURN(result, int_quant::FakeQuantDynamicComposed(x, spec));
        break;
      }
      case Family::kFp8: {
        QD_ASSIGN_OR_RETURN(result, fp8::FakeQuantDynamicComposed(x, spec));
        break;
      }
      case Family::kMx: {
        QD_ASSIGN_OR_RETURN(result, mx::FakeQuantDynamicComposed(x, spec));
        break;
      }
    }
    if (used != nullptr) *used = result.second;
    return result.first;
  });
}

StatusOr<QuantizedTensor> RealQuantize(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp_in, const FakeQuantOptions& options) {
  return Guarded("RealQuantize", [&]() -> StatusOr<QuantizedTensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    const Family family = FamilyOf(spec);
    QuantizedTensor q;
    if (family == Family::kCast) {
      q.codes = x.to(cast::TargetDtype(spec));
      return q;
    }
    if (qp_in.defined()) {
      q.qparams = qp_in;
    } else {
      QD_ASSIGN_OR_RETURN(q.qparams, ComputeQParams(x, spec, options));
    }
    if (family == Family::kMx) q.e8m0 = mx::E8M0Codes(q.qparams.scale);
    if (x.numel() == 0) {
      const bool int8_codes =
          (family == Family::kInt && IsSignedInt(spec.dtype)) || spec.dtype == DataType::kMxInt8;
      q.codes = at::empty(x.sizes(), int8_codes ? at::kChar : at::kByte);
      return q;
    }
    const bool composed = impl == Impl::kComposed;
    const at::Tensor xc = composed ? x : x.contiguous();
    switch (family) {
      case Family::kInt: {
        QD_ASSIGN_OR_RETURN(q.codes, composed ? int_quant::QuantizeComposed(xc, spec, q.qparams)
                                              : int_quant::QuantizeFused(xc, spec, q.qparams));
        break;
      }
      case Family::kFp8: {
        QD_ASSIGN_OR_RETURN(q.codes, composed ? fp8::QuantizeComposed(xc, spec, q.qparams)
                                              : fp8::QuantizeFused(xc, spec, q.qparams));
        break;
      }
      default: {
        QD_ASSIGN_OR_RETURN(q.codes, composed ? mx::QuantizeComposed(xc, spec, q.qparams)
                                              : mx::QuantizeFused(xc, spec, q.qparams));
        break;
      }
    }
    return q;
  });
}

StatusOr<at::Tensor> Dequantize(const QuantizedTensor& q, const QuantSpec& spec,
                                at::ScalarType dtype) {
  return Guarded("Dequantize", [&]() -> StatusOr<at::Tensor> {
    if (!q.codes.defined()) return InvalidArgumentError("Dequantize: codes are undefined");
    switch (FamilyOf(spec)) {
      case Family::kCast:
        return q.codes.to(dtype);
      case Family::kFp8: {
        QD_ASSIGN_OR_RETURN(at::Tensor v, fp8::DequantizeCodes(q.codes, spec, q.qparams));
        return v.to(dtype);
      }
      case Family::kMx: {
        QD_ASSIGN_OR_RETURN(at::Tensor v, mx::DequantizeCodes(q.codes, spec, q.qparams));
        return v.to(dtype);
      }
      case Family::kInt:
        break;
    }
    QD_ASSIGN_OR_RETURN(kernel::KernelShape s, KernelShapeFor(q.codes.sizes().vec(), spec));
    if (!q.qparams.scale.defined() || q.qparams.scale.numel() != s.num_params() ||
        !q.qparams.zero_point.defined() || q.qparams.zero_point.numel() != s.num_params()) {
      return InvalidArgumentError("Dequantize: scale / zero_point do not match the codes");
    }
    const at::Tensor codes = KernelView(q.codes.to(at::kFloat), s);
    const at::Tensor scale = BroadcastParam(q.qparams.scale.to(q.codes.device()).to(at::kFloat), s);
    const at::Tensor zp =
        BroadcastParam(q.qparams.zero_point.to(q.codes.device()).to(at::kFloat), s);
    return ((codes - zp) * scale).reshape(q.codes.sizes()).to(dtype);
  });
}

bool HasCudaKernels() {
#if defined(QUANTD_CUDA_KERNELS)
  return true;
#else
  return false;
#endif
}

}  // namespace quantd::quant
