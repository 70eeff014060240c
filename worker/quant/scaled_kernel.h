// The fused CPU loops shared by the scaled formats (integers and FP8): apply
// an element operation with per-slot parameters (1 / scale, scale, zero
// point) in one read and one write per element, and the dynamic variant that
// computes each slot's parameters from its own data in the same pass when a
// slot is one contiguous span. Plus the scalar `_ref` loop the tests hold the
// fused one against. Internal to worker/quant.
#ifndef QUANTD_WORKER_QUANT_SCALED_KERNEL_H_
#define QUANTD_WORKER_QUANT_SCALED_KERNEL_H_

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "worker/quant/kernel_common.h"

namespace quantd::quant::kernel {

// Per-slot parameters as float arrays (num_params() entries each).
struct SlotParams {
  const float* inv_scale;
  const float* scale;
  const float* zero_point;
};

// y[i] = OutIo::Store(op(InIo::Load(x[i]), inv, scale, zp)) for every
// element, with the parameters of its slot.
template <class InIo, class OutIo, class Op>
void ApplyScaled(const KernelShape& s, const typename InIo::T* x, typename OutIo::T* y,
                 const SlotParams& p, const Op& op) {
  const SpanList spans(s);
  ParallelSpans(spans, [&](const Span& sp) QD_LOOP_BODY {
    const typename InIo::T* xs = x + sp.offset;
    typename OutIo::T* ys = y + sp.offset;
    const int64_t len = sp.length;
    if (sp.param_stride == 0) {
      const float inv = p.inv_scale[sp.param_offset];
      const float scale = p.scale[sp.param_offset];
      const float zp = p.zero_point[sp.param_offset];
      for (int64_t j = 0; j < len; ++j) ys[j] = OutIo::Store(op(InIo::Load(xs[j]), inv, scale, zp));
    } else {
      const float* inv = p.inv_scale + sp.param_offset;
      const float* scale = p.scale + sp.param_offset;
      const float* zp = p.zero_point + sp.param_offset;
      for (int64_t j = 0; j < len; ++j) {
        ys[j] = OutIo::Store(op(InIo::Load(xs[j]), inv[j], scale[j], zp[j]));
      }
    }
  });
}

// Dynamic single pass for shapes where SpanList::OneSpanPerParam(): each
// span's min / max, then make(mn, mx, &scale, &zp), then the element op,
// while the span is still in cache. Writes the slot parameters it used.
template <class InIo, class OutIo, class Op, class Make>
void ApplyScaledDynamicOnePass(const KernelShape& s, const typename InIo::T* x,
                               typename OutIo::T* y, float* scale_out, float* zp_out, const Op& op,
                               const Make& make) {
  const SpanList spans(s);
  ParallelSpans(spans, [&](const Span& sp) QD_LOOP_BODY {
    const typename InIo::T* xs = x + sp.offset;
    typename OutIo::T* ys = y + sp.offset;
    float mn = 0;
    float mx = 0;
    FinishMinMax(ReduceSpanMinMax<InIo>(xs, sp.length, MinMaxAcc()), &mn, &mx);
    float scale = 1;
    float zp = 0;
    make(mn, mx, &scale, &zp);
    scale_out[sp.param_offset] = scale;
    zp_out[sp.param_offset] = zp;
    const float inv = 1.0f / scale;
    for (int64_t j = 0; j < sp.length; ++j) {
      ys[j] = OutIo::Store(op(InIo::Load(xs[j]), inv, scale, zp));
    }
  });
}

// Scalar twin of ApplyScaled: element by element, slot index from the
// element's coordinates, the reference op.
template <class InIo, class OutIo, class RefOp>
void ApplyScaledRef(const KernelShape& s, const typename InIo::T* x, typename OutIo::T* y,
                    const float* scale, const float* zero_point, const RefOp& op) {
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t c = 0; c < s.n; ++c) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t e = (o * s.n + c) * s.inner + i;
        const int64_t k = ParamIndexRef(s, o, c, i);
        y[e] = OutIo::Store(op(InIo::Load(x[e]), scale[k], zero_point[k]));
      }
    }
  }
}

// Output storage for integer codes.
struct IoInt8 {
  using T = int8_t;
  static int8_t Store(float f) { return static_cast<int8_t>(static_cast<int32_t>(f)); }
};
struct IoUInt8 {
  using T = uint8_t;
  static uint8_t Store(float f) { return static_cast<uint8_t>(static_cast<int32_t>(f)); }
};

// Calls fn(Io{}) with the storage type of a float32 / float16 / bfloat16
// tensor; returns false for any other dtype.
template <class Fn>
bool DispatchFloatIo(c10::ScalarType t, const Fn& fn) {
  switch (t) {
    case c10::ScalarType::Float:
      fn(IoFloat{});
      return true;
    case c10::ScalarType::Half:
      fn(IoFloat16{});
      return true;
    case c10::ScalarType::BFloat16:
      fn(IoBFloat16{});
      return true;
    default:
      return false;
  }
}

}  // namespace quantd::quant::kernel

#endif  // QUANTD_WORKER_QUANT_SCALED_KERNEL_H_
