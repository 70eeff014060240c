#include "worker/quant/cuda/fake_quant_cuda.h"

#include <limits>
#include <string>

#include "worker/quant/cuda/fake_quant_kernels.h"
#include "worker/quant/kernel_args.h"

namespace quantd::quant::cuda {
namespace {

constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();

Storage StorageOf(at::ScalarType t) {
  if (t == at::kHalf) return Storage::kFloat16;
  if (t == at::kBFloat16) return Storage::kBFloat16;
  return Storage::kFloat32;
}

SlotShape SlotShapeOf(const kernel::KernelShape& k) {
  SlotShape s;
  s.layout = k.layout == kernel::ParamLayout::kScalar       ? 0
             : k.layout == kernel::ParamLayout::kPerChannel ? 1
                                                            : 2;
  s.numel = static_cast<uint32_t>(k.numel());
  s.n = static_cast<uint32_t>(k.n);
  s.inner = static_cast<uint32_t>(k.inner);
  s.group = static_cast<uint32_t>(k.group);
  s.num_groups = static_cast<uint32_t>(k.num_groups);
  return s;
}

Status FromLaunch(const char* error) {
  if (error == nullptr) return OkStatus();
  return InternalError(std::string("CUDA fake-quant kernel: ") + error);
}

}  // namespace

bool Supports(const at::Tensor& x, const QuantSpec& spec) {
  if (!x.is_cuda() || x.numel() > kMaxElements) return false;
  const at::ScalarType t = x.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) return false;
  if (IsIntType(spec.dtype) || IsFp8Type(spec.dtype)) return true;
  if (!IsMxType(spec.dtype)) return false;
  auto shape = KernelShapeFor(x.sizes().vec(), spec);
  return shape.ok() && shape->inner == 1 && shape->group == 32;
}

StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x_in, const QuantSpec& spec, const QParams& qp,
                                  QParams* used) {
  if (!Supports(x_in, spec)) {
    return FailedPreconditionError("the CUDA fake-quant kernels do not take " + DescribeSpec(spec) +
                                   " on this tensor");
  }
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  QD_ASSIGN_OR_RETURN(kernel::KernelShape k, KernelShapeFor(x.sizes().vec(), spec));
  const int device_index = x.device().index();
  if (IsMxType(spec.dtype)) {
    MxArgs a;
    a.storage = StorageOf(x.scalar_type());
    a.x = x.data_ptr();
    a.y = y.data_ptr();
    a.rows = static_cast<uint32_t>(k.outer);
    a.n = static_cast<uint32_t>(k.n);
    a.mxint = spec.dtype == DataType::kMxInt8;
    a.signed_zero = spec.dtype == DataType::kMxFp8E4M3 || spec.dtype == DataType::kMxFp8E5M2;
    a.format = MinifloatFormatOf(spec.dtype);
    a.scale_mode = spec.mx_scale_mode;
    at::Tensor scale;
    if (qp.scale.defined()) {
      QD_ASSIGN_OR_RETURN(scale, kernel::ParamOn(qp.scale, k.num_params(), x.device(), "scale"));
      a.scale_in = scale.data_ptr<float>();
    } else {
      scale = at::empty(ParamSizes(x.sizes().vec(), spec), x.options().dtype(at::kFloat));
      a.scale_out = scale.data_ptr<float>();
    }
    QD_RETURN_IF_ERROR(FromLaunch(LaunchMx(a, device_index)));
    if (used != nullptr) {
      *used = QParams();
      used->scale = scale.reshape(ParamSizes(x.sizes().vec(), spec));
    }
    return y;
  }
  ScaledArgs a;
  a.storage = StorageOf(x.scalar_type());
  a.x = x.data_ptr();
  a.y = y.data_ptr();
  a.shape = SlotShapeOf(k);
  QD_ASSIGN_OR_RETURN(at::Tensor scale,
                      kernel::ParamOn(qp.scale, k.num_params(), x.device(), "scale"));
  a.scale = scale.data_ptr<float>();
  at::Tensor zero_point;
  if (IsIntType(spec.dtype)) {
    QD_ASSIGN_OR_RETURN(zero_point,
                        kernel::ParamOn(qp.zero_point, k.num_params(), x.device(), "zero_point"));
    a.zero_point = zero_point.data_ptr<float>();
    const IntRange range = IntRangeOf(spec.dtype);
    a.qmin = static_cast<float>(range.qmin);
    a.qmax = static_cast<float>(range.qmax);
    a.round = spec.round_method;
    a.float_zero_point = !spec.symmetric && spec.zero_point_type == ZeroPointType::kFloat32;
  } else {
    a.fp8 = true;
    a.format = MinifloatFormatOf(spec.dtype);
  }
  QD_RETURN_IF_ERROR(FromLaunch(LaunchScaled(a, device_index)));
  if (used != nullptr) *used = qp;
  return y;
}

}  // namespace quantd::quant::cuda
