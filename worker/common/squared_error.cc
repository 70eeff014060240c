#include "worker/common/squared_error.h"

#include <algorithm>

namespace quantd {
namespace {

// 32 MiB of float64 per slice: large enough that a GPU reduction is not
// launch-bound, small enough to stay in the allocator's reused blocks.
constexpr int64_t kSliceElements = int64_t{1} << 22;

at::Tensor Flat(const at::Tensor& t) { return t.is_contiguous() ? t.view(-1) : t.reshape(-1); }

at::Tensor ZeroSum(const at::Tensor& like) {
  return at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(like.device()));
}

// A float64 buffer for one slice of an n-element tensor, on its device.
at::Tensor SliceBuffer(const at::Tensor& like, int64_t n) {
  return at::empty({std::min(kSliceElements, n)},
                   at::TensorOptions().dtype(at::kDouble).device(like.device()));
}

}  // namespace

SquaredError SumSquaredError(const at::Tensor& out, const at::Tensor& ref) {
  TORCH_CHECK(out.numel() == ref.numel(), "SumSquaredError: ", out.numel(),
              " elements against a reference of ", ref.numel());
  const at::Tensor o = Flat(out), r = Flat(ref);
  at::Tensor ref_sum = ZeroSum(ref), err_sum = ZeroSum(ref);
  const int64_t n = r.numel();
  // Two float64 slice buffers for the whole loop: fresh 32 MiB allocations
  // per slice would each be new pages to fault in.
  at::Tensor ref_buf = SliceBuffer(ref, n), diff_buf = SliceBuffer(ref, n);
  for (int64_t i = 0; i < n; i += kSliceElements) {
    const int64_t len = std::min(kSliceElements, n - i);
    const at::Tensor rs = ref_buf.narrow(0, 0, len).copy_(r.narrow(0, i, len));
    const at::Tensor ds = diff_buf.narrow(0, 0, len).copy_(o.narrow(0, i, len)).sub_(rs);
    // dot(x, x): the square and the sum in one pass, with no temporary.
    ref_sum.add_(at::dot(rs, rs));
    err_sum.add_(at::dot(ds, ds));
  }
  return {ref_sum.item<double>(), err_sum.item<double>()};
}

double SumOfSquares(const at::Tensor& x) {
  const at::Tensor f = Flat(x);
  at::Tensor sum = ZeroSum(x);
  const int64_t n = f.numel();
  at::Tensor buf = SliceBuffer(x, n);
  for (int64_t i = 0; i < n; i += kSliceElements) {
    const int64_t len = std::min(kSliceElements, n - i);
    const at::Tensor s = buf.narrow(0, 0, len).copy_(f.narrow(0, i, len));
    sum.add_(at::dot(s, s));
  }
  return sum.item<double>();
}

}  // namespace quantd
