#include "worker/quant/format_kernels.h"

#include <array>
#include <memory>
#include <string>

#include "worker/quant/cast.h"
#include "worker/quant/fp8.h"
#include "worker/quant/int_quant.h"
#include "worker/quant/mx.h"
#include "worker/quant/observer.h"

namespace quantd::quant {
namespace {

// ---- integers and FP8: parameters per slot from an observer ----

// Percentile / MSE parameters of x alone: one batch through the observer.
StatusOr<QParams> HistogramQParams(const at::Tensor& x, const QuantSpec& spec) {
  QD_ASSIGN_OR_RETURN(std::unique_ptr<Observer> observer, Observer::Create(spec));
  QD_RETURN_IF_ERROR(observer->Observe(x));
  QD_ASSIGN_OR_RETURN(QParams qp, observer->ComputeQParams());
  qp.scale = qp.scale.to(x.device());
  if (qp.zero_point.defined()) qp.zero_point = qp.zero_point.to(x.device());
  return qp;
}

// The observer's parameters; min-max through the family's fused reduction
// or the composed one.
template <StatusOr<QParams> (*kMinMaxFused)(const at::Tensor&, const QuantSpec&)>
StatusOr<QParams> ScaledQParams(const at::Tensor& x, const QuantSpec& spec, bool composed) {
  if (spec.observer != ObserverType::kMinMax) return HistogramQParams(x, spec);
  if (composed) {
    QD_ASSIGN_OR_RETURN(auto mm, MinMaxComposed(x, spec));
    return QParamsFromMinMax(mm.first, mm.second, spec, x.scalar_type());
  }
  return kMinMaxFused(x.contiguous(), spec);
}

// ---- MX: block scales from the block amax ----

StatusOr<QParams> MxBlockScales(const at::Tensor& x, const QuantSpec& spec, bool composed) {
  QParams qp;
  if (composed) {
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

// The fused or reference MX kernel, with block scales from x when qp has none.
template <Status (*kKernel)(const at::Tensor&, const QuantSpec&, const QParams&, at::Tensor&)>
Status MxFakeQuantInto(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                       at::Tensor& out) {
  if (qp.scale.defined()) return kKernel(x, spec, qp, out);
  QD_ASSIGN_OR_RETURN(QParams blocks, MxBlockScales(x, spec, /*composed=*/false));
  return kKernel(x, spec, blocks, out);
}

StatusOr<at::Tensor> MxFakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                         const QParams& qp) {
  if (qp.scale.defined()) return mx::FakeQuantComposed(x, spec, qp);
  QD_ASSIGN_OR_RETURN(auto yq, mx::FakeQuantDynamicComposed(x, spec));
  return yq.first;
}

// ---- casts: no parameters ----

StatusOr<QParams> CastQParams(const at::Tensor&, const QuantSpec&, bool) { return QParams(); }

template <Status (*kKernel)(const at::Tensor&, const QuantSpec&, at::Tensor&)>
Status CastFakeQuantInto(const at::Tensor& x, const QuantSpec& spec, const QParams&,
                         at::Tensor& out) {
  return kKernel(x, spec, out);
}

StatusOr<at::Tensor> CastFakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                           const QParams&) {
  return cast::FakeQuantComposed(x, spec);
}

StatusOr<QParams> CastFakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                            at::Tensor& out) {
  QD_RETURN_IF_ERROR(cast::FakeQuantFused(x, spec, out));
  return QParams();
}

StatusOr<std::pair<at::Tensor, QParams>> CastFakeQuantDynamicComposed(const at::Tensor& x,
                                                                      const QuantSpec& spec) {
  QD_ASSIGN_OR_RETURN(at::Tensor y, cast::FakeQuantComposed(x, spec));
  return std::make_pair(y, QParams());
}

// The "codes" of a cast are x in the narrower float.
StatusOr<at::Tensor> CastCodes(const at::Tensor& x, const QuantSpec& spec, const QParams&) {
  return x.to(cast::TargetDtype(spec));
}

StatusOr<at::Tensor> CastValues(const at::Tensor& codes, const QuantSpec&, const QParams&) {
  return codes;
}

// One row per FormatFamily, in enum order.
constexpr std::array<FormatKernels, 4> kFamilyKernels = {{
    // kInt
    {ScaledQParams<int_quant::MinMaxQParamsFused>, int_quant::FakeQuantFused,
     int_quant::FakeQuantRef, int_quant::FakeQuantComposed, int_quant::FakeQuantDynamicFused,
     int_quant::FakeQuantDynamicComposed, int_quant::QuantizeFused, int_quant::QuantizeComposed,
     int_quant::DequantizeCodes},
    // kFp8
    {ScaledQParams<fp8::MinMaxQParamsFused>, fp8::FakeQuantFused, fp8::FakeQuantRef,
     fp8::FakeQuantComposed, fp8::FakeQuantDynamicFused, fp8::FakeQuantDynamicComposed,
     fp8::QuantizeFused, fp8::QuantizeComposed, fp8::DequantizeCodes},
    // kMx
    {MxBlockScales, MxFakeQuantInto<mx::FakeQuantFused>, MxFakeQuantInto<mx::FakeQuantRef>,
     MxFakeQuantComposed, mx::FakeQuantDynamicFused, mx::FakeQuantDynamicComposed,
     mx::QuantizeFused, mx::QuantizeComposed, mx::DequantizeCodes},
    // kCast
    {CastQParams, CastFakeQuantInto<cast::FakeQuantFused>, CastFakeQuantInto<cast::FakeQuantRef>,
     CastFakeQuantComposed, CastFakeQuantDynamicFused, CastFakeQuantDynamicComposed, CastCodes,
     CastCodes, CastValues},
}};
static_assert(static_cast<size_t>(FormatFamily::kCast) + 1 == kFamilyKernels.size(),
              "one FormatKernels row per known FormatFamily");

}  // namespace

StatusOr<const FormatKernels*> KernelsOf(FormatFamily family) {
  const auto i = static_cast<size_t>(family);
  if (i >= kFamilyKernels.size()) return InvalidArgumentError("unknown data type");
  return &kFamilyKernels[i];
}

StatusOr<const FormatKernels*> KernelsFor(const QuantSpec& spec) {
  return KernelsOf(FormatOf(spec.dtype).family);
}

}  // namespace quantd::quant
