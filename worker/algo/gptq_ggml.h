// GPTQ with a llama.cpp block type as its quantizer: the K-quant grid (and
// the 32-element types a recipe falls back to) in place of an integer spec.
//
// The column loop is GptqQuantizeWeight's (gptq.h): each column is rounded,
// its error scaled by the inverse Hessian and spread over the columns not yet
// quantized. What differs is the grid. When the loop reaches the first
// column of a block (256 columns for the K types, 32 for Q4_0..Q8_0), ggml's
// quantizer fits that block of every row on the weights as updated so far,
// importance-weighted by diag(H) (the squared activations llama.cpp's
// imatrix sums, up to a constant factor), exactly as llama-quantize would
// fit those values; the block's scales and mins are then fixed, and each of
// its columns takes the code whose decoded value (ggml_block_grid.h) is
// nearest. With static_groups every block is fit before the loop on the
// original weights, which lets act_order process columns in its own order.
// The blocks keep ggml's scales and hold GPTQ's codes; the returned weight is
// their DequantizeRow, what llama.cpp computes with.
//
// Runs on the CPU whatever the Hessian's device (the block fit is ggml's
// scalar code).
#ifndef QUANTD_WORKER_ALGO_GPTQ_GGML_H_
#define QUANTD_WORKER_ALGO_GPTQ_GGML_H_

#include <ATen/ATen.h>

#include <string>

#include "worker/algo/gptq.h"
#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::algo {

struct GgmlGptqResult : GptqStats {
  // The decoded blocks [out, in], float32 on the CPU.
  at::Tensor weight;
  // uint8 [out, row bytes]: each row's blocks in ggml's layout.
  at::Tensor blocks;
};

// OK when GptqQuantizeGgml takes `type` for rows of `cols` with `options`;
// otherwise INVALID_ARGUMENT saying why, before any work.
Status CheckGgmlGptq(gguf::GgmlType type, int64_t cols, const config::GptqOptions& options);

// GPTQ on weight [out, in] with the Hessian of its inputs [in, in] and the
// block grid of `type` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K). Never
// throws; CANCELLED between column blocks when the job is stopped.
StatusOr<GgmlGptqResult> GptqQuantizeGgml(const at::Tensor& weight, const at::Tensor& hessian,
                                          gguf::GgmlType type,
                                          const config::GptqOptions& options = {});

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_GPTQ_GGML_H_
