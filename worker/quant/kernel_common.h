// Shared machinery of the fused CPU kernels: how a tensor is cut into
// contiguous spans that share quantization parameters, element loads and
// stores for float32 / float16 / bfloat16 storage, and the parallel span
// loop. Internal to worker/quant: the public entry points are in
// fake_quant.h.
//
// A tensor is viewed as [outer, n, inner] around its quantization axis (n).
// Parameters are laid out as
//   per_tensor:  1                 (one scale for everything)
//   per_channel: n                 (index c along the axis)
//   per_group:   outer * G * inner (G = ceil(n / group); index (o, g, i)),
// which is the shape of the input with the axis replaced by C or G.
#ifndef QUANTD_WORKER_QUANT_KERNEL_COMMON_H_
#define QUANTD_WORKER_QUANT_KERNEL_COMMON_H_

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "worker/quant/float_bits.h"

namespace quantd::quant::kernel {

// ---- instruction set ----
//
// The hot loops are compiled twice, for baseline x86-64 (SSE2, what the
// build targets) and for AVX2 (twice the lanes), and RunSimd picks one at
// run time. Both use the same IEEE operations without contraction, so the
// results are identical. A loop body is a lambda marked QD_LOOP_BODY so it
// inlines into the AVX2 instantiation and is vectorised there.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define QD_LOOP_BODY __attribute__((always_inline))

inline std::atomic<bool>& BaselineSimdForced() {
  static std::atomic<bool> forced{false};
  return forced;
}

inline bool Avx2Enabled() {
  static const bool has_avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has_avx2 && !BaselineSimdForced().load(std::memory_order_relaxed);
}

template <class Body>
__attribute__((target("avx2"), noinline)) void RunWithAvx2(const Body& body) {
  body();
}

template <class Body>
__attribute__((noinline)) void RunBaseline(const Body& body) {
  body();
}

template <class Body>
inline void RunSimd(const Body& body) {
  if (Avx2Enabled()) {
    RunWithAvx2(body);
  } else {
    RunBaseline(body);
  }
}
#else
#define QD_LOOP_BODY
inline std::atomic<bool>& BaselineSimdForced() {
  static std::atomic<bool> forced{false};
  return forced;
}
inline bool Avx2Enabled() { return false; }
template <class Body>
inline void RunSimd(const Body& body) {
  body();
}
#endif

// Tests run both instantiations: true forces the baseline one.
inline void ForceBaselineSimdForTesting(bool force) { BaselineSimdForced().store(force); }

enum class ParamLayout { kScalar, kPerChannel, kPerGroup };

struct KernelShape {
  ParamLayout layout = ParamLayout::kScalar;
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
  int64_t group = 1;       // per_group: elements per group along n
  int64_t num_groups = 1;  // per_group: ceil(n / group)

  int64_t numel() const { return outer * n * inner; }
  int64_t num_params() const {
    switch (layout) {
      case ParamLayout::kScalar:
        return 1;
      case ParamLayout::kPerChannel:
        return n;
      case ParamLayout::kPerGroup:
        return outer * num_groups * inner;
    }
    return 1;
  }
};

// Builds the view for `sizes` around `axis` (already non-negative).
inline KernelShape MakeKernelShape(const std::vector<int64_t>& sizes, int axis, ParamLayout layout,
                                   int64_t group) {
  KernelShape s;
  s.layout = layout;
  int64_t numel = 1;
  for (int64_t d : sizes) numel *= d;
  if (layout == ParamLayout::kScalar) {
    s.n = numel;
    return s;
  }
  for (int d = 0; d < axis; ++d) s.outer *= sizes[d];
  s.n = sizes[axis];
  for (size_t d = axis + 1; d < sizes.size(); ++d) s.inner *= sizes[d];
  if (layout == ParamLayout::kPerGroup) {
    s.group = group;
    s.num_groups = s.n == 0 ? 0 : (s.n + group - 1) / group;
  }
  return s;
}

// One contiguous run of elements: x[offset + j] for j < length uses the
// parameters at param_offset + j * param_stride (stride 0 or 1).
struct Span {
  int64_t offset;
  int64_t length;
  int64_t param_offset;
  int64_t param_stride;
};

// The spans of a shape, addressed by index so that threads can take ranges.
class SpanList {
 public:
  static constexpr int64_t kScalarChunk = 16384;

  explicit SpanList(const KernelShape& s) : s_(s) {
    switch (s.layout) {
      case ParamLayout::kScalar:
        count_ = (s.numel() + kScalarChunk - 1) / kScalarChunk;
        span_len_ = kScalarChunk;
        break;
      case ParamLayout::kPerChannel:
        count_ = s.inner == 1 ? s.outer : s.outer * s.n;
        span_len_ = s.inner == 1 ? s.n : s.inner;
        break;
      case ParamLayout::kPerGroup:
        count_ = s.inner == 1 ? s.outer * s.num_groups : s.outer * s.n;
        span_len_ = s.inner == 1 ? s.group : s.inner;
        break;
    }
  }

  int64_t count() const { return count_; }
  int64_t typical_length() const { return std::max<int64_t>(span_len_, 1); }

  Span operator[](int64_t k) const {
    switch (s_.layout) {
      case ParamLayout::kScalar: {
        const int64_t off = k * kScalarChunk;
        return {off, std::min(kScalarChunk, s_.numel() - off), 0, 0};
      }
      case ParamLayout::kPerChannel:
        if (s_.inner == 1) return {k * s_.n, s_.n, 0, 1};
        return {k * s_.inner, s_.inner, k % s_.n, 0};
      case ParamLayout::kPerGroup:
        if (s_.inner == 1) {
          const int64_t o = k / s_.num_groups;
          const int64_t g = k % s_.num_groups;
          const int64_t start = g * s_.group;
          return {o * s_.n + start, std::min(s_.group, s_.n - start), k, 0};
        } else {
          const int64_t o = k / s_.n;
          const int64_t c = k % s_.n;
          return {k * s_.inner, s_.inner, (o * s_.num_groups + c / s_.group) * s_.inner, 1};
        }
    }
    return {0, 0, 0, 0};
  }

  // fn(span) for spans begin..end-1 in order; only the first span's
  // position is divided out, the rest advance by counters (per-span integer
  // divisions would cost more than quantizing a 32-element MX block).
  template <class Fn>
  QD_ALWAYS_INLINE void ForEach(int64_t begin, int64_t end, const Fn& fn) const {
    if (begin >= end) return;
    switch (s_.layout) {
      case ParamLayout::kScalar:
        for (int64_t k = begin; k < end; ++k) fn((*this)[k]);
        return;
      case ParamLayout::kPerChannel:
        if (s_.inner == 1) {
          for (int64_t k = begin; k < end; ++k) fn(Span{k * s_.n, s_.n, 0, 1});
        } else {
          int64_t c = begin % s_.n;
          for (int64_t k = begin; k < end; ++k) {
            fn(Span{k * s_.inner, s_.inner, c, 0});
            if (++c == s_.n) c = 0;
          }
        }
        return;
      case ParamLayout::kPerGroup:
        if (s_.inner == 1) {
          int64_t o = begin / s_.num_groups;
          int64_t g = begin % s_.num_groups;
          for (int64_t k = begin; k < end; ++k) {
            const int64_t start = g * s_.group;
            fn(Span{o * s_.n + start, std::min(s_.group, s_.n - start), k, 0});
            if (++g == s_.num_groups) {
              g = 0;
              ++o;
            }
          }
        } else {
          int64_t o = begin / s_.n;
          int64_t c = begin % s_.n;
          int64_t g = c / s_.group;
          int64_t in_group = c % s_.group;
          for (int64_t k = begin; k < end; ++k) {
            fn(Span{k * s_.inner, s_.inner, (o * s_.num_groups + g) * s_.inner, 1});
            if (++in_group == s_.group) {
              in_group = 0;
              ++g;
            }
            if (++c == s_.n) {
              c = 0;
              g = 0;
              in_group = 0;
              ++o;
            }
          }
        }
        return;
    }
  }

  // True when every parameter slot is covered by exactly one span (so a
  // dynamic kernel can reduce, compute the parameters and quantize a span in
  // one pass over memory).
  bool OneSpanPerParam() const {
    if (s_.layout == ParamLayout::kPerGroup) return s_.inner == 1;
    if (s_.layout == ParamLayout::kPerChannel) return s_.inner > 1 && s_.outer == 1;
    return s_.numel() <= kScalarChunk;
  }

 private:
  KernelShape s_;
  int64_t count_ = 0;
  int64_t span_len_ = 1;
};

// Runs fn(span) for every span, spread over ATen's intra-op threads in
// tasks of roughly 64K elements. Each task runs under RunSimd, so fn (a
// QD_LOOP_BODY lambda) is compiled for the chosen instruction set.
template <class Fn>
void ParallelSpans(const SpanList& spans, const Fn& fn) {
  const int64_t grain = std::max<int64_t>(1, 65536 / spans.typical_length());
  at::parallel_for(0, spans.count(), grain, [&](int64_t begin, int64_t end) {
    RunSimd([&]() QD_LOOP_BODY { spans.ForEach(begin, end, fn); });
  });
}

// ---- element storage ----

struct IoFloat {
  using T = float;
  QD_ALWAYS_INLINE static float Load(float v) { return v; }
  QD_ALWAYS_INLINE static float Store(float f) { return f; }
};

struct IoBFloat16 {
  using T = uint16_t;
  QD_ALWAYS_INLINE static float Load(uint16_t v) { return Bf16BitsToFloat(v); }
  QD_ALWAYS_INLINE static uint16_t Store(float f) { return FloatToBf16Bits(f); }
};

struct IoFloat16 {
  using T = uint16_t;
  QD_ALWAYS_INLINE static float Load(uint16_t v) { return Fp16BitsToFloat(v); }
  QD_ALWAYS_INLINE static uint16_t Store(float f) { return FloatToFp16Bits(f); }
};

// ---- min / max reduction per parameter slot ----

// Running min / max of a run of elements that also remembers whether a NaN
// was seen, so the result propagates NaN like at::aminmax.
struct MinMaxAcc {
  float mn = std::numeric_limits<float>::infinity();
  float mx = -std::numeric_limits<float>::infinity();
  bool nan = false;
};

// Float order as int32 order: negative floats have their magnitude bits
// flipped (an involution), so integer min / max give the float min / max.
// Integer reductions vectorise; float ones do not without fast-math.
QD_ALWAYS_INLINE int32_t OrderedKey(float f) {
  const int32_t i = static_cast<int32_t>(BitsOf(f));
  return i ^ ((i >> 31) & 0x7FFFFFFF);
}
inline float FromOrderedKey(int32_t k) {
  return FloatOf(static_cast<uint32_t>(k ^ ((k >> 31) & 0x7FFFFFFF)));
}

// Call from inside RunSimd (ParallelSpans tasks are).
template <class Io>
QD_ALWAYS_INLINE MinMaxAcc ReduceSpanMinMax(const typename Io::T* x, int64_t len, MinMaxAcc acc) {
  int32_t kmn = OrderedKey(acc.mn);
  int32_t kmx = OrderedKey(acc.mx);
  int nan = 0;
  for (int64_t j = 0; j < len; ++j) {
    const float v = Io::Load(x[j]);
    const int32_t k = OrderedKey(v);
    kmn = std::min(kmn, k);
    kmx = std::max(kmx, k);
    nan |= (v != v);
  }
  // The keys order -0 below +0; the parameter formulas treat both alike.
  acc.mn = FromOrderedKey(kmn);
  acc.mx = FromOrderedKey(kmx);
  acc.nan = acc.nan || nan != 0;
  return acc;
}

QD_ALWAYS_INLINE void FinishMinMax(const MinMaxAcc& acc, float* mn, float* mx) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  *mn = acc.nan ? qnan : acc.mn;
  *mx = acc.nan ? qnan : acc.mx;
}

// Min and max per parameter slot of `x`; mn / mx have num_params() entries.
// Each slot is owned by one task, so no partial results are merged across
// threads and the result does not depend on the thread count.
template <class Io>
void ReduceMinMax(const KernelShape& s, const typename Io::T* x, float* mn, float* mx) {
  const float inf = std::numeric_limits<float>::infinity();
  switch (s.layout) {
    case ParamLayout::kScalar: {
      const SpanList spans(s);
      std::vector<MinMaxAcc> parts(spans.count());
      ParallelSpans(spans, [&](const Span& sp) QD_LOOP_BODY {
        parts[sp.offset / SpanList::kScalarChunk] =
            ReduceSpanMinMax<Io>(x + sp.offset, sp.length, MinMaxAcc());
      });
      MinMaxAcc all;
      for (const MinMaxAcc& p : parts) {
        all.mn = std::min(all.mn, p.mn);
        all.mx = std::max(all.mx, p.mx);
        all.nan = all.nan || p.nan;
      }
      FinishMinMax(all, mn, mx);
      return;
    }
    case ParamLayout::kPerChannel:
      if (s.inner == 1) {
        // Columns of an [outer, n] matrix: tasks own column blocks.
        const int64_t block = 256;
        const int64_t nblocks = (s.n + block - 1) / block;
        at::parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
          std::vector<int> nan(block);
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t c0 = b * block;
            const int64_t len = std::min(block, s.n - c0);
            std::fill(nan.begin(), nan.end(), 0);
            for (int64_t c = 0; c < len; ++c) {
              mn[c0 + c] = inf;
              mx[c0 + c] = -inf;
            }
            RunSimd([&]() QD_LOOP_BODY {
              for (int64_t o = 0; o < s.outer; ++o) {
                const typename Io::T* row = x + o * s.n + c0;
                for (int64_t c = 0; c < len; ++c) {
                  const float v = Io::Load(row[c]);
                  mn[c0 + c] = std::min(mn[c0 + c], v);
                  mx[c0 + c] = std::max(mx[c0 + c], v);
                  nan[c] |= (v != v);
                }
              }
            });
            for (int64_t c = 0; c < len; ++c) {
              FinishMinMax({mn[c0 + c], mx[c0 + c], nan[c] != 0}, &mn[c0 + c], &mx[c0 + c]);
            }
          }
        });
      } else {
        at::parallel_for(0, s.n, 1, [&](int64_t c0, int64_t c1) {
          RunSimd([&]() QD_LOOP_BODY {
            for (int64_t c = c0; c < c1; ++c) {
              MinMaxAcc acc;
              for (int64_t o = 0; o < s.outer; ++o) {
                acc = ReduceSpanMinMax<Io>(x + (o * s.n + c) * s.inner, s.inner, acc);
              }
              FinishMinMax(acc, &mn[c], &mx[c]);
            }
          });
        });
      }
      return;
    case ParamLayout::kPerGroup:
      if (s.inner == 1) {
        const SpanList spans(s);
        ParallelSpans(spans, [&](const Span& sp) QD_LOOP_BODY {
          FinishMinMax(ReduceSpanMinMax<Io>(x + sp.offset, sp.length, MinMaxAcc()),
                       &mn[sp.param_offset], &mx[sp.param_offset]);
        });
      } else {
        const int64_t slots = s.outer * s.num_groups;
        at::parallel_for(0, slots, 1, [&](int64_t k0, int64_t k1) {
          std::vector<int> nan(s.inner);
          for (int64_t k = k0; k < k1; ++k) {
            const int64_t o = k / s.num_groups;
            const int64_t g = k % s.num_groups;
            float* kmn = mn + k * s.inner;
            float* kmx = mx + k * s.inner;
            std::fill(kmn, kmn + s.inner, inf);
            std::fill(kmx, kmx + s.inner, -inf);
            std::fill(nan.begin(), nan.end(), 0);
            const int64_t c_end = std::min(s.n, (g + 1) * s.group);
            RunSimd([&]() QD_LOOP_BODY {
              for (int64_t c = g * s.group; c < c_end; ++c) {
                const typename Io::T* row = x + (o * s.n + c) * s.inner;
                for (int64_t i = 0; i < s.inner; ++i) {
                  const float v = Io::Load(row[i]);
                  kmn[i] = std::min(kmn[i], v);
                  kmx[i] = std::max(kmx[i], v);
                  nan[i] |= (v != v);
                }
              }
            });
            for (int64_t i = 0; i < s.inner; ++i) {
              FinishMinMax({kmn[i], kmx[i], nan[i] != 0}, &kmn[i], &kmx[i]);
            }
          }
        });
      }
      return;
  }
}

// Scalar twin of ReduceMinMax: one element at a time, parameter index
// computed from the element's coordinates.
inline int64_t ParamIndexRef(const KernelShape& s, int64_t o, int64_t c, int64_t i) {
  switch (s.layout) {
    case ParamLayout::kScalar:
      return 0;
    case ParamLayout::kPerChannel:
      return c;
    case ParamLayout::kPerGroup:
      return (o * s.num_groups + c / s.group) * s.inner + i;
  }
  return 0;
}

}  // namespace quantd::quant::kernel

#endif  // QUANTD_WORKER_QUANT_KERNEL_COMMON_H_
