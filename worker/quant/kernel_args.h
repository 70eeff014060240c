// Argument plumbing of the format kernels (int_quant.cc, fp8.cc, mx.cc,
// cast.cc): typed data pointers, dtype dispatch with a Status, and the
// per-slot parameter arrays taken from a QParams. Internal to worker/quant.
#ifndef QUANTD_WORKER_QUANT_KERNEL_ARGS_H_
#define QUANTD_WORKER_QUANT_KERNEL_ARGS_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/scaled_kernel.h"

namespace quantd::quant::kernel {

template <class Io>
const typename Io::T* In(const at::Tensor& x) {
  return static_cast<const typename Io::T*>(x.data_ptr());
}

template <class Io>
typename Io::T* Out(at::Tensor& y) {
  return static_cast<typename Io::T*>(y.data_ptr());
}

// DispatchFloatIo with a Status for other dtypes.
template <class Fn>
Status DispatchIo(const at::Tensor& x, const Fn& fn) {
  if (!DispatchFloatIo(x.scalar_type(), fn)) {
    return InvalidArgumentError(std::string("unsupported input dtype ") +
                                c10::toString(x.scalar_type()));
  }
  return OkStatus();
}

// 1 / scale, scale and zero point per slot as float arrays.
struct SlotArrays {
  std::vector<float> inv;
  std::vector<float> scale;
  std::vector<float> zp;
  SlotParams view() const { return {inv.data(), scale.data(), zp.data()}; }
};

// From qp (num_slots entries each). Without a zero point (FP8) zp is zeros.
inline StatusOr<SlotArrays> SlotArraysOf(const QParams& qp, int64_t num_slots,
                                         bool with_zero_point) {
  SlotArrays a;
  QD_ASSIGN_OR_RETURN(a.scale, ParamArray(qp.scale, num_slots, "scale"));
  if (with_zero_point) {
    QD_ASSIGN_OR_RETURN(a.zp, ParamArray(qp.zero_point, num_slots, "zero_point"));
  } else {
    a.zp.assign(num_slots, 0.0f);
  }
  a.inv.resize(num_slots);
  for (int64_t i = 0; i < num_slots; ++i) a.inv[i] = 1.0f / a.scale[i];
  return a;
}

// A parameter tensor as a contiguous float32 tensor on `device`;
// INVALID_ARGUMENT when it does not have `count` entries.
inline StatusOr<at::Tensor> ParamOn(const at::Tensor& p, int64_t count, const at::Device& device,
                                    const char* what) {
  if (!p.defined() || p.numel() != count) {
    return InvalidArgumentError(std::string(what) + " needs " + std::to_string(count) +
                                " entries for this tensor and spec");
  }
  return p.to(device, at::kFloat).contiguous();
}

// The same, shaped to broadcast against KernelView.
inline StatusOr<at::Tensor> ComposedParam(const at::Tensor& p, const KernelShape& s,
                                          const at::Device& device, const char* what) {
  QD_ASSIGN_OR_RETURN(at::Tensor t, ParamOn(p, s.num_params(), device, what));
  return BroadcastParam(t, s);
}

}  // namespace quantd::quant::kernel

#endif  // QUANTD_WORKER_QUANT_KERNEL_ARGS_H_
