#include "worker/io/gguf/rope_layout.h"

#include <vector>

namespace quantd::gguf {
namespace {

// Views each head's rows as [a, b] and swaps the two, so a row index
// (x * b + y) becomes (y * a + x).
StatusOr<at::Tensor> SwapHeadRowFactors(const at::Tensor& w, int64_t heads, bool to_half) {
  if (w.dim() < 1 || heads <= 0 || w.size(0) % heads != 0 || (w.size(0) / heads) % 2 != 0) {
    return InvalidArgumentError("cannot split " + std::to_string(w.dim() ? w.size(0) : 0) +
                                " rows into " + std::to_string(heads) +
                                " heads of an even size for the RoPE row permutation");
  }
  const int64_t half = w.size(0) / heads / 2;
  std::vector<int64_t> shape = {heads, to_half ? half : 2, to_half ? 2 : half};
  for (int64_t d = 1; d < w.dim(); ++d) shape.push_back(w.size(d));
  try {
    return w.reshape(shape).transpose(1, 2).reshape(w.sizes()).contiguous();
  } catch (const c10::Error& e) {
    return InternalError(std::string("RoPE row permutation failed: ") + e.what_without_backtrace());
  }
}

}  // namespace

StatusOr<at::Tensor> RopeInterleavedToHalf(const at::Tensor& w, int64_t heads) {
  return SwapHeadRowFactors(w, heads, /*to_half=*/true);
}

StatusOr<at::Tensor> RopeHalfToInterleaved(const at::Tensor& w, int64_t heads) {
  return SwapHeadRowFactors(w, heads, /*to_half=*/false);
}

}  // namespace quantd::gguf
