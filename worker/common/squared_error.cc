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

}  // namespace

SquaredError SumSquaredError(const at::Tensor& out, const at::Tensor& ref) {
  TORCH_CHECK(out.numel() == ref.numel(), "SumSquaredError: ", out.numel(),
              " elements against a reference of ", ref.numel());
  const at::Tensor o = Flat(out), r = Flat(ref);
  at::Tensor ref_sum = ZeroSum(ref), err_sum = ZeroSum(ref);
  const int64_t n = r.numel();
  for (int64_t i = 0; i < n; i += kSliceElements) {
    const int64_t len = std::min(kSliceElements, n - i);
    const at::Tensor rs = r.narrow(0, i, len).to(at::kDouble);
    ref_sum.add_(rs.square().sum());
    err_sum.add_(o.narrow(0, i, len).to(at::kDouble).sub(rs).square_().sum());
  }
  return {ref_sum.item<double>(), err_sum.item<double>()};
}

double SumOfSquares(const at::Tensor& x) {
  const at::Tensor f = Flat(x);
  at::Tensor sum = ZeroSum(x);
  const int64_t n = f.numel();
  for (int64_t i = 0; i < n; i += kSliceElements) {
    const int64_t len = std::min(kSliceElements, n - i);
    sum.add_(f.narrow(0, i, len).to(at::kDouble).square().sum());
  }
  return sum.item<double>();
}

}  // namespace quantd
