#include "worker/quant/fake_quant.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#if defined(QUANTD_CUDA_KERNELS)
#include "worker/quant/cuda/fake_quant_cuda.h"
#endif
#include "worker/quant/format_kernels.h"
#include "worker/quant/mx.h"

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

}  // namespace

StatusOr<QParams> ComputeQParams(const at::Tensor& x, const QuantSpec& spec,
                                 const FakeQuantOptions& options) {
  return Guarded("ComputeQParams", [&]() -> StatusOr<QParams> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    if (IsCastType(spec.dtype)) return QParams();
    QD_RETURN_IF_ERROR(CheckShape(x, spec));
    if (x.numel() == 0) return EmptyQParams(x, spec);
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    return kernels->qparams(x, spec, impl == Impl::kComposed);
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
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    const at::Tensor xc = x.contiguous();
    return impl == Impl::kFused ? kernels->fake_quant_fused(xc, spec, qp, out)
                                : kernels->fake_quant_ref(xc, spec, qp, out);
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
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    return kernels->fake_quant_composed(x, spec, qp);
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
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    const at::Tensor xc = x.contiguous();
    QParams qp;
    if (impl == Impl::kReference) {
      // Reference: parameters from the separate reduction, then the scalar
      // element loop.
      QD_ASSIGN_OR_RETURN(qp, ComputeQParams(xc, spec, options));
      QD_RETURN_IF_ERROR(FakeQuantizeInto(xc, spec, qp, out, options));
    } else {
      QD_ASSIGN_OR_RETURN(qp, kernels->fake_quant_dynamic_fused(xc, spec, out));
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
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    QD_ASSIGN_OR_RETURN(auto result, kernels->fake_quant_dynamic_composed(x, spec));
    if (used != nullptr) *used = result.second;
    return result.first;
  });
}

StatusOr<QuantizedTensor> RealQuantize(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp_in, const FakeQuantOptions& options) {
  return Guarded("RealQuantize", [&]() -> StatusOr<QuantizedTensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    QuantizedTensor q;
    if (IsCastType(spec.dtype)) {  // no parameters: the codes are the cast
      QD_ASSIGN_OR_RETURN(q.codes, kernels->quantize_composed(x, spec, QParams()));
      return q;
    }
    if (qp_in.defined()) {
      q.qparams = qp_in;
    } else {
      QD_ASSIGN_OR_RETURN(q.qparams, ComputeQParams(x, spec, options));
    }
    if (IsMxType(spec.dtype)) q.e8m0 = mx::E8M0Codes(q.qparams.scale);
    if (x.numel() == 0) {
      // Signed integers and MXINT8 store int8 codes, the rest bit patterns.
      const bool int8_codes = FormatOf(spec.dtype).code_range.qmin < 0;
      q.codes = at::empty(x.sizes(), int8_codes ? at::kChar : at::kByte);
      return q;
    }
    const bool composed = impl == Impl::kComposed;
    const at::Tensor xc = composed ? x : x.contiguous();
    QD_ASSIGN_OR_RETURN(q.codes, composed ? kernels->quantize_composed(xc, spec, q.qparams)
                                          : kernels->quantize_fused(xc, spec, q.qparams));
    return q;
  });
}

StatusOr<at::Tensor> Dequantize(const QuantizedTensor& q, const QuantSpec& spec,
                                at::ScalarType dtype) {
  return Guarded("Dequantize", [&]() -> StatusOr<at::Tensor> {
    if (!q.codes.defined()) return InvalidArgumentError("Dequantize: codes are undefined");
    QD_ASSIGN_OR_RETURN(const FormatKernels* kernels, KernelsFor(spec));
    QD_ASSIGN_OR_RETURN(at::Tensor v, kernels->dequantize(q.codes, spec, q.qparams));
    return v.to(dtype);
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
