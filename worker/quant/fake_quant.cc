#include "worker/quant/fake_quant.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "worker/quant/int_quant.h"

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

Status Unsupported(const QuantSpec& spec) {
  return UnimplementedError("quantization to " + std::string(DataTypeName(spec.dtype)) +
                            " is not available in this build of the engine");
}

// Parameters for an empty tensor: neutral values in the QParams shapes.
QParams EmptyQParams(const at::Tensor& x, const QuantSpec& spec) {
  QParams qp;
  const std::vector<int64_t> sizes = ParamSizes(x.sizes().vec(), spec);
  qp.scale = at::ones(sizes, at::kFloat);
  if (IsIntType(spec.dtype)) qp.zero_point = at::zeros(sizes, at::kInt);
  return qp;
}

}  // namespace

StatusOr<QParams> ComputeQParams(const at::Tensor& x, const QuantSpec& spec,
                                 const FakeQuantOptions& options) {
  return Guarded("ComputeQParams", [&]() -> StatusOr<QParams> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    if (IsCastType(spec.dtype)) return QParams();
    if (x.numel() == 0) return EmptyQParams(x, spec);
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (IsIntType(spec.dtype)) {
      if (spec.observer != ObserverType::kMinMax) return Unsupported(spec);
      if (impl == Impl::kComposed) {
        QD_ASSIGN_OR_RETURN(auto mm, MinMaxComposed(x, spec));
        return QParamsFromMinMax(mm.first, mm.second, spec, x.scalar_type());
      }
      return int_quant::MinMaxQParamsFused(x.contiguous(), spec);
    }
    return Unsupported(spec);
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
    if (x.numel() == 0) return OkStatus();
    const at::Tensor xc = x.contiguous();
    if (IsIntType(spec.dtype)) {
      return impl == Impl::kFused ? int_quant::FakeQuantFused(xc, spec, qp, out)
                                  : int_quant::FakeQuantRef(xc, spec, qp, out);
    }
    return Unsupported(spec);
  });
}

StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                                  const FakeQuantOptions& options) {
  return Guarded("FakeQuantize", [&]() -> StatusOr<at::Tensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (x.numel() == 0) return x.clone();
    if (impl == Impl::kComposed) {
      if (IsIntType(spec.dtype)) return int_quant::FakeQuantComposed(x, spec, qp);
      return Unsupported(spec);
    }
    at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    QD_RETURN_IF_ERROR(FakeQuantizeInto(x, spec, qp, out, options));
    return out;
  });
}

StatusOr<at::Tensor> FakeQuantizeDynamic(const at::Tensor& x, const QuantSpec& spec,
                                         const FakeQuantOptions& options, QParams* used) {
  return Guarded("FakeQuantizeDynamic", [&]() -> StatusOr<at::Tensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    if (x.numel() == 0) {
      if (used != nullptr) *used = EmptyQParams(x, spec);
      return x.clone();
    }
    if (!IsIntType(spec.dtype)) return Unsupported(spec);
    if (impl == Impl::kComposed) {
      QD_ASSIGN_OR_RETURN(auto yq, int_quant::FakeQuantDynamicComposed(x, spec));
      if (used != nullptr) *used = yq.second;
      return yq.first;
    }
    const at::Tensor xc = x.contiguous();
    at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    if (impl == Impl::kReference) {
      QD_ASSIGN_OR_RETURN(QParams qp, int_quant::MinMaxQParamsFused(xc, spec));
      QD_RETURN_IF_ERROR(int_quant::FakeQuantRef(xc, spec, qp, out));
      if (used != nullptr) *used = qp;
      return out;
    }
    QD_ASSIGN_OR_RETURN(QParams qp, int_quant::FakeQuantDynamicFused(xc, spec, out));
    if (used != nullptr) *used = qp;
    return out;
  });
}

StatusOr<QuantizedTensor> RealQuantize(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp_in, const FakeQuantOptions& options) {
  return Guarded("RealQuantize", [&]() -> StatusOr<QuantizedTensor> {
    QD_RETURN_IF_ERROR(CheckInput(x));
    QD_ASSIGN_OR_RETURN(Impl impl, ChooseImpl(x, options));
    QuantizedTensor q;
    if (!IsIntType(spec.dtype)) return Unsupported(spec);
    if (qp_in.defined()) {
      q.qparams = qp_in;
    } else {
      QD_ASSIGN_OR_RETURN(q.qparams, ComputeQParams(x, spec, options));
    }
    if (x.numel() == 0) {
      q.codes = at::empty(x.sizes(), IsSignedInt(spec.dtype) ? at::kChar : at::kByte);
      return q;
    }
    if (impl == Impl::kComposed) {
      QD_ASSIGN_OR_RETURN(q.codes, int_quant::QuantizeComposed(x, spec, q.qparams));
    } else {
      QD_ASSIGN_OR_RETURN(q.codes, int_quant::QuantizeFused(x.contiguous(), spec, q.qparams));
    }
    return q;
  });
}

StatusOr<at::Tensor> Dequantize(const QuantizedTensor& q, const QuantSpec& spec,
                                at::ScalarType dtype) {
  return Guarded("Dequantize", [&]() -> StatusOr<at::Tensor> {
    if (!q.codes.defined()) return InvalidArgumentError("Dequantize: codes are undefined");
    if (!IsIntType(spec.dtype)) return Unsupported(spec);
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

}  // namespace quantd::quant
