// The error propagation both of GPTQ's host column loops share (gptq.cc's
// integer loop, gptq_ggml.cc's ggml-grid loop). Weights are held transposed,
// column c of W as the contiguous row c of wt ([cols, rows]); hi is the
// upper Cholesky factor of the inverse Hessian, [cols, cols] row-major.
#ifndef QUANTD_WORKER_ALGO_GPTQ_LOOP_H_
#define QUANTD_WORKER_ALGO_GPTQ_LOOP_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace quantd::algo::gptq_loop {

// Column p of rows [r0, r1) rounded to q: its error scaled by Hinv_pp into
// ep, the reference's loss added to row_loss, and the scaled error taken off
// the block's later columns p+1 .. i2-1 (each times Hinv_pc).
inline void SpreadColumnError(float* w, const float* q, float* ep, const float* hi, int64_t p,
                              int64_t i2, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                              std::vector<double>& row_loss) {
  const float d = hi[p * cols + p];
  const float* wp = w + p * rows;
  for (int64_t r = r0; r < r1; ++r) {
    const float diff = wp[r] - q[r];
    ep[r] = diff / d;
    row_loss[r] += static_cast<double>(diff) * diff / (static_cast<double>(d) * d) / 2;
  }
  for (int64_t c = p + 1; c < i2; ++c) {
    const float h = hi[p * cols + c];
    float* wc = w + c * rows;
    for (int64_t r = r0; r < r1; ++r) wc[r] -= ep[r] * h;
  }
}

// The lazy batch update after the block of columns [i1, i2): every later
// column takes the block's scaled errors times its rows of the inverse.
inline void LazyUpdate(at::Tensor& wt, const at::Tensor& hinv, const at::Tensor& err, int64_t i1,
                       int64_t i2, int64_t cols) {
  if (i2 >= cols) return;
  wt.narrow(0, i2, cols - i2)
      .addmm_(hinv.narrow(0, i1, i2 - i1).narrow(1, i2, cols - i2).t(), err.narrow(0, 0, i2 - i1),
              /*beta=*/1, /*alpha=*/-1);
}

}  // namespace quantd::algo::gptq_loop

#endif  // QUANTD_WORKER_ALGO_GPTQ_LOOP_H_
