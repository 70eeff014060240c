// GPTQ's column loop for integer weight specs as one CUDA kernel per block
// of columns: no host round trip and no per-column launches. Each thread
// owns one row and keeps the block's columns of that row in shared memory.
// The element arithmetic is element_ops.h's and the order of operations is
// the host loop's (GptqRun::IntegerBlock); built with -fmad=false
// (CMakeLists.txt), so the codes are those of the per-column tensor-op loop
// on the same device, bit for bit.
#include "worker/algo/cuda/gptq_kernels.h"
#include "worker/quant/cuda/gpu_runtime.h"
#include "worker/quant/element_ops.h"

namespace quantd::algo::cuda {
namespace {

using quant::RoundMethod;
namespace element = quant::element;

constexpr int kRows = 32;  // rows (threads) per CUDA block: one warp

struct KeepScale {
  __device__ __forceinline__ float operator()(float s) const { return s; }
};

template <RoundMethod R, bool kFloatZp>
__global__ void IntegerBlockKernel(IntegerBlockArgs a) {
  extern __shared__ float tile[];  // [i2 - i1][kRows]: this block's rows of the block's columns
  const int t = threadIdx.x;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRows + t;
  if (r >= a.rows) return;  // a thread reads and writes only its own column of the tile
  const int64_t rows = a.rows, cols = a.cols, i1 = a.i1, i2 = a.i2, groups = a.groups;
  for (int64_t c = i1; c < i2; ++c) tile[(c - i1) * kRows + t] = a.w[c * rows + r];

  const element::IntFakeQuantOp<R, kFloatZp> op{a.qmin, a.qmax};
  double loss = a.loss[r];
  int64_t cached_group = -1;
  float s = 1.0f, z = 0.0f;
  for (int64_t p = i1; p < i2; ++p) {
    int64_t g = 0;
    if (a.group_mode == 1) g = p / a.group_size;
    if (a.group_mode == 2) g = a.perm[p] / a.group_size;
    if (a.group_mode == 1 && p % a.group_size == 0) {
      // The group's min / max on its columns as updated so far; columns
      // past this block are read from the weight (the lazy updates so far).
      const int64_t end = p + a.group_size < cols ? p + a.group_size : cols;
      float mn = tile[(p - i1) * kRows + t], mx = mn;
      for (int64_t c = p + 1; c < end; ++c) {
        const float v = c < i2 ? tile[(c - i1) * kRows + t] : a.w[c * rows + r];
        mn = quant::MinOf(mn, v);
        mx = quant::MaxOf(mx, v);
      }
      const element::IntSlotParams sz =
          element::IntParamsFromMinMax(mn, mx, a.qmin, a.qmax, a.symmetric, a.float_zero_point,
                                       a.symmetric_zero_point, KeepScale{});
      a.scale[r * groups + g] = sz.scale;
      if (a.zero_point != nullptr) a.zero_point[r * groups + g] = sz.zero_point;
      cached_group = -1;
    }
    if (g != cached_group) {
      s = a.scale[r * groups + g];
      z = a.zero_point != nullptr ? a.zero_point[r * groups + g] : 0.0f;
      cached_group = g;
    }
    const float* hrow = a.hinv + p * cols;
    const float d = hrow[p];
    const float x = tile[(p - i1) * kRows + t];
    const float xq = op(x, 1.0f / s, s, z);
    a.q[p * rows + r] = xq;
    const float diff = x - xq;
    const float e = diff / d;
    a.err[(p - i1) * rows + r] = e;
    loss += static_cast<double>(diff) * diff / (static_cast<double>(d) * d) / 2;
#pragma unroll 4
    for (int64_t c = p + 1; c < i2; ++c) tile[(c - i1) * kRows + t] -= e * hrow[c];
  }
  a.loss[r] = loss;
}

template <RoundMethod R, bool kFloatZp>
void Launch(const IntegerBlockArgs& a, gpu::Stream stream) {
  const unsigned blocks = static_cast<unsigned>((a.rows + kRows - 1) / kRows);
  const size_t shared = static_cast<size_t>(a.i2 - a.i1) * kRows * sizeof(float);
  IntegerBlockKernel<R, kFloatZp><<<blocks, kRows, shared, stream>>>(a);
}

template <bool kFloatZp>
void LaunchFor(const IntegerBlockArgs& a, gpu::Stream stream) {
  switch (a.round) {
    case RoundMethod::kHalfEven:
      Launch<RoundMethod::kHalfEven, kFloatZp>(a, stream);
      return;
    case RoundMethod::kRound:
      Launch<RoundMethod::kRound, kFloatZp>(a, stream);
      return;
    case RoundMethod::kFloor:
      Launch<RoundMethod::kFloor, kFloatZp>(a, stream);
      return;
  }
}

}  // namespace

const char* LaunchIntegerBlock(const IntegerBlockArgs& args, int device_index) {
  if (args.rows == 0 || args.i2 <= args.i1) return nullptr;
  if (args.i2 - args.i1 > kMaxBlockColumns) return "GPTQ block wider than the kernel's tile";
  const gpu::Stream stream = gpu::CurrentStream(device_index);
  const bool float_zp = !args.symmetric && args.float_zero_point;
  if (float_zp) {
    LaunchFor<true>(args, stream);
  } else {
    LaunchFor<false>(args, stream);
  }
  return gpu::LastError();
}

}  // namespace quantd::algo::cuda
