// The fused CUDA fake-quant kernels: one read and one write per element,
// parameters from a slot array (integers, FP8) or from the element's own MX
// block (amax, shared exponent and elements in one warp). The element
// arithmetic is element_ops.h, the code the CPU kernels run; built with
// -fmad=false (CMakeLists.txt) the results are bit-identical to them.
#include <type_traits>

#include "worker/quant/cuda/fake_quant_kernels.h"
#include "worker/quant/cuda/gpu_runtime.h"
#include "worker/quant/element_ops.h"

namespace quantd::quant::cuda {
namespace {

using element::Fp8FakeQuantOp;
using element::IntFakeQuantOp;

// ---- element storage (as kernel::IoFloat / IoFloat16 / IoBFloat16) ----

struct DevFloat {
  using T = float;
  static __device__ __forceinline__ float Load(float v) { return v; }
  static __device__ __forceinline__ float Store(float f) { return f; }
};
struct DevFloat16 {
  using T = uint16_t;
  static __device__ __forceinline__ float Load(uint16_t v) { return Fp16BitsToFloat(v); }
  static __device__ __forceinline__ uint16_t Store(float f) { return FloatToFp16Bits(f); }
};
struct DevBFloat16 {
  using T = uint16_t;
  static __device__ __forceinline__ float Load(uint16_t v) { return Bf16BitsToFloat(v); }
  static __device__ __forceinline__ uint16_t Store(float f) { return FloatToBf16Bits(f); }
};

// V elements moved as one aligned load / store.
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The parameter slot of element e (kernel::ParamIndexRef on the flat index).
__device__ __forceinline__ uint32_t SlotOf(const SlotShape& s, uint32_t e) {
  if (s.layout == 0) return 0;
  const uint32_t q = e / s.inner;
  const uint32_t i = e - q * s.inner;
  const uint32_t o = q / s.n;
  const uint32_t c = q - o * s.n;
  if (s.layout == 1) return c;
  return (o * s.num_groups + c / s.group) * s.inner + i;
}

// Each thread takes V consecutive elements. With V > 1 the host has checked
// that they share one slot (slot_step 0) or use consecutive ones (1).
template <class Io, class Op, int V>
__global__ void ScaledKernel(const typename Io::T* __restrict__ x, typename Io::T* __restrict__ y,
                             SlotShape s, const float* __restrict__ scale,
                             const float* __restrict__ zero_point, uint32_t slot_step, Op op) {
  using P = Pack<typename Io::T, V>;
  const uint32_t packs = s.numel / V;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs;
       p += gridDim.x * blockDim.x) {
    const P in = reinterpret_cast<const P*>(x)[p];
    P out;
    uint32_t k = SlotOf(s, p * V);
    if (slot_step == 0) {  // one slot for the pack: its parameters once
      const float sc = __ldg(scale + k);
      const float inv = 1.0f / sc;
      const float zp = zero_point != nullptr ? __ldg(zero_point + k) : 0.0f;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = Io::Store(op(Io::Load(in.v[j]), inv, sc, zp));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j, ++k) {
        const float sc = __ldg(scale + k);
        const float zp = zero_point != nullptr ? __ldg(zero_point + k) : 0.0f;
        out.v[j] = Io::Store(op(Io::Load(in.v[j]), 1.0f / sc, sc, zp));
      }
    }
    reinterpret_cast<P*>(y)[p] = out;
  }
}

// The block scale from its amax (as float bits; non-negative floats order
// as their bits), as mx::ScaleFromAmax computes it.
__device__ __forceinline__ float BlockScale(uint32_t amax_bits, const MxArgs& a) {
  return Pow2Wide(MxScaleExponent(FloatOf(amax_bits), a.scale_mode, a.format.mbits, a.format.emax));
}

// The element op of an MX block given its scale (and, when the scale is a
// normal power of two, its exact reciprocal), as the CPU kernel picks it.
template <class Io>
struct MxElements {
  const MxArgs* a;
  __device__ __forceinline__ float operator()(float v, float scale) const {
    if (a->mxint) {
      const float unit = element::MxIntElementScale(scale);
      return element::MxIntOp{}(v, 1.0f / unit, unit, 0.0f);
    }
    if (element::ReciprocalIsExact(scale)) {
      return element::MxFpOp<true>{a->format, a->signed_zero}(v, 1.0f / scale, scale, 0.0f);
    }
    return element::MxFpOp<false>{a->format, a->signed_zero}(v, 1.0f / scale, scale, 0.0f);
  }
};

// One warp per MX block of 32: lane j holds element j of the block.
template <class Io>
__global__ void MxKernel(const typename Io::T* __restrict__ x, typename Io::T* __restrict__ y,
                         MxArgs a, uint32_t num_blocks, uint32_t blocks_per_row) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warps_per_cta = blockDim.x / 32u;
  for (uint32_t b = blockIdx.x * warps_per_cta + threadIdx.x / 32u; b < num_blocks;
       b += gridDim.x * warps_per_cta) {
    const uint32_t row = b / blocks_per_row;
    const uint32_t col = (b - row * blocks_per_row) * 32u + lane;
    const bool live = col < a.n;
    const uint32_t e = row * a.n + col;
    const float v = live ? Io::Load(x[e]) : 0.0f;
    float scale;
    if (a.scale_in != nullptr) {
      scale = __ldg(a.scale_in + b);
    } else {
      // Non-negative floats order as their bits: an integer max.
      uint32_t m = BitsOf(element::FiniteAbs(v));
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) m = MaxOf(m, QD_SHFL_XOR(m, off));
      scale = BlockScale(m, a);
      if (lane == 0) a.scale_out[b] = scale;
    }
    if (!live) continue;
    y[e] = Io::Store(MxElements<Io>{&a}(v, scale));
  }
}

// Rows whose length is a multiple of 32 (so no block straddles a row), with
// aligned storage: each lane takes 4 consecutive elements and 8 lanes one
// block, so a warp moves 4 blocks with one vector load per lane. The whole
// warp runs every iteration (the shuffles need all 32 lanes); lanes past
// the end only take part in the reduction.
template <class Io>
__global__ void MxKernelVec4(const typename Io::T* __restrict__ x, typename Io::T* __restrict__ y,
                             MxArgs a, uint32_t quads) {
  using P = Pack<typename Io::T, 4>;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t stride = gridDim.x * blockDim.x;
  const MxElements<Io> elements{&a};
  for (uint32_t q0 = blockIdx.x * blockDim.x + threadIdx.x - lane; q0 < quads; q0 += stride) {
    const uint32_t q = q0 + lane;
    const bool live = q < quads;
    P in;
    float v[4];
    if (live) {
      in = reinterpret_cast<const P*>(x)[q];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = Io::Load(in.v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = 0.0f;
    }
    const uint32_t block = q >> 3;
    float scale;
    if (a.scale_in != nullptr) {
      scale = live ? __ldg(a.scale_in + block) : 1.0f;
    } else {
      uint32_t m = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) m = MaxOf(m, BitsOf(element::FiniteAbs(v[j])));
#pragma unroll
      for (int off = 4; off > 0; off >>= 1) m = MaxOf(m, QD_SHFL_XOR(m, off));
      scale = BlockScale(m, a);
      if (live && (lane & 7u) == 0) a.scale_out[block] = scale;
    }
    if (!live) continue;
    P out;
#pragma unroll
    for (int j = 0; j < 4; ++j) out.v[j] = Io::Store(elements(v[j], scale));
    reinterpret_cast<P*>(y)[q] = out;
  }
}

constexpr int kThreads = 256;

uint32_t GridFor(uint64_t work_items, uint32_t per_cta) {
  const uint64_t ctas = (work_items + per_cta - 1) / per_cta;
  return static_cast<uint32_t>(ctas < 1 ? 1 : (ctas > 1048576 ? 1048576 : ctas));
}

// Whether V = 4 consecutive elements share a slot or use consecutive
// ones, and which (the step); -1 when they do not.
int VectorSlotStep(const SlotShape& s) {
  if (s.numel % 4 != 0) return -1;
  switch (s.layout) {
    case 0:
      return 0;
    case 1:
      if (s.inner == 1) return s.n % 4 == 0 ? 1 : -1;
      return s.inner % 4 == 0 ? 0 : -1;
    default:
      if (s.inner == 1) return s.n % 4 == 0 && s.group % 4 == 0 ? 0 : -1;
      return s.inner % 4 == 0 ? 1 : -1;
  }
}

template <class Io, class Op>
void LaunchScaledTyped(const ScaledArgs& a, const Op& op, gpu::Stream stream) {
  using T = typename Io::T;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int step = VectorSlotStep(a.shape);
  const bool aligned = reinterpret_cast<uintptr_t>(x) % (4 * sizeof(T)) == 0 &&
                       reinterpret_cast<uintptr_t>(y) % (4 * sizeof(T)) == 0;
  if (step >= 0 && aligned) {
    ScaledKernel<Io, Op, 4><<<GridFor(a.shape.numel / 4, kThreads), kThreads, 0, stream>>>(
        x, y, a.shape, a.scale, a.zero_point, static_cast<uint32_t>(step), op);
  } else {
    ScaledKernel<Io, Op, 1><<<GridFor(a.shape.numel, kThreads), kThreads, 0, stream>>>(
        x, y, a.shape, a.scale, a.zero_point, 0u, op);
  }
}

template <class Io>
void LaunchScaledOp(const ScaledArgs& a, gpu::Stream stream) {
  if (a.fp8) {
    LaunchScaledTyped<Io>(a, Fp8FakeQuantOp{a.format}, stream);
    return;
  }
  auto with_zp = [&](auto float_zp) {
    constexpr bool kFloatZp = decltype(float_zp)::value;
    switch (a.round) {
      case RoundMethod::kHalfEven:
        LaunchScaledTyped<Io>(a, IntFakeQuantOp<RoundMethod::kHalfEven, kFloatZp>{a.qmin, a.qmax},
                              stream);
        return;
      case RoundMethod::kRound:
        LaunchScaledTyped<Io>(a, IntFakeQuantOp<RoundMethod::kRound, kFloatZp>{a.qmin, a.qmax},
                              stream);
        return;
      case RoundMethod::kFloor:
        LaunchScaledTyped<Io>(a, IntFakeQuantOp<RoundMethod::kFloor, kFloatZp>{a.qmin, a.qmax},
                              stream);
        return;
    }
  };
  if (a.float_zero_point) {
    with_zp(std::true_type{});
  } else {
    with_zp(std::false_type{});
  }
}

template <class Fn>
void WithStorage(Storage s, const Fn& fn) {
  switch (s) {
    case Storage::kFloat32:
      fn(DevFloat{});
      return;
    case Storage::kFloat16:
      fn(DevFloat16{});
      return;
    case Storage::kBFloat16:
      fn(DevBFloat16{});
      return;
  }
}

}  // namespace

const char* LaunchScaled(const ScaledArgs& args, int device_index) {
  if (args.shape.numel == 0) return nullptr;
  const gpu::Stream stream = gpu::CurrentStream(device_index);
  WithStorage(args.storage, [&](auto io) { LaunchScaledOp<decltype(io)>(args, stream); });
  return gpu::LastError();
}

const char* LaunchMx(const MxArgs& args, int device_index) {
  if (args.rows == 0 || args.n == 0) return nullptr;
  const gpu::Stream stream = gpu::CurrentStream(device_index);
  const uint32_t blocks_per_row = (args.n + 31u) / 32u;
  const uint32_t num_blocks = args.rows * blocks_per_row;
  WithStorage(args.storage, [&](auto io) {
    using Io = decltype(io);
    using T = typename Io::T;
    const T* x = static_cast<const T*>(args.x);
    T* y = static_cast<T*>(args.y);
    const bool aligned = reinterpret_cast<uintptr_t>(x) % (4 * sizeof(T)) == 0 &&
                         reinterpret_cast<uintptr_t>(y) % (4 * sizeof(T)) == 0;
    if (args.n % 32 == 0 && aligned) {
      const uint32_t quads = num_blocks * 8;
      MxKernelVec4<Io><<<GridFor(quads, kThreads), kThreads, 0, stream>>>(x, y, args, quads);
    } else {
      MxKernel<Io><<<GridFor(num_blocks, kThreads / 32), kThreads, 0, stream>>>(
          x, y, args, num_blocks, blocks_per_row);
    }
  });
  return gpu::LastError();
}

}  // namespace quantd::quant::cuda
