#include "worker/quant/cast.h"

#include <string>

#include "worker/quant/kernel_args.h"

namespace quantd::quant::cast {
namespace {

Status CheckCastSpec(const QuantSpec& spec) {
  if (!IsCastType(spec.dtype)) {
    return InvalidArgumentError("cast kernel called for " + std::string(DataTypeName(spec.dtype)));
  }
  return OkStatus();
}

template <class Io, class Round>
void CastLoop(const at::Tensor& x, at::Tensor& out, const Round& round) {
  const typename Io::T* xp = kernel::In<Io>(x);
  typename Io::T* yp = kernel::Out<Io>(out);
  at::parallel_for(0, x.numel(), 65536, [&](int64_t begin, int64_t end) {
    kernel::RunSimd([&]() QD_LOOP_BODY {
      for (int64_t i = begin; i < end; ++i) yp[i] = Io::Store(round(Io::Load(xp[i])));
    });
  });
}

}  // namespace

at::ScalarType TargetDtype(const QuantSpec& spec) {
  return spec.dtype == DataType::kFloat16 ? at::kHalf : at::kBFloat16;
}

Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckCastSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  return kernel::DispatchIo(x, [&](auto io) {
    using Io = decltype(io);
    if (spec.dtype == DataType::kFloat16) {
      CastLoop<Io>(x, out, [](float f) QD_LOOP_BODY { return RoundToFloat16(f); });
    } else {
      CastLoop<Io>(x, out, [](float f) QD_LOOP_BODY { return RoundToBFloat16(f); });
    }
  });
}

Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, at::Tensor& out) {
  QD_RETURN_IF_ERROR(CheckCastSpec(spec));
  QD_RETURN_IF_ERROR(CheckFusedArgs(x, out));
  const at::Tensor xf = x.to(at::kFloat).contiguous();
  at::Tensor yf = at::empty_like(xf);
  const float* xp = xf.data_ptr<float>();
  float* yp = yf.data_ptr<float>();
  for (int64_t i = 0; i < xf.numel(); ++i) {
    yp[i] = spec.dtype == DataType::kFloat16 ? static_cast<float>(c10::Half(xp[i]))
                                             : static_cast<float>(c10::BFloat16(xp[i]));
  }
  out.copy_(yf);
  return OkStatus();
}

StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec) {
  QD_RETURN_IF_ERROR(CheckCastSpec(spec));
  return x.to(TargetDtype(spec)).to(x.scalar_type());
}

}  // namespace quantd::quant::cast
