// Row orders of RoPE projections: Hugging Face's rotate-half order vs the
// interleaved order llama.cpp uses for Llama q/k weights.
//
// Within each head of d rows, Hugging Face rotates row i with row i + d/2;
// llama.cpp (like Meta's original checkpoints) rotates adjacent rows 2i and
// 2i+1. Converting between the two is a fixed permutation of each head's
// rows, applied to q with num_attention_heads and to k with
// num_key_value_heads (and to q/k biases the same way).
#ifndef QUANTD_WORKER_IO_GGUF_ROPE_LAYOUT_H_
#define QUANTD_WORKER_IO_GGUF_ROPE_LAYOUT_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "worker/common/status.h"

namespace quantd::gguf {

// llama.cpp (interleaved) -> Hugging Face (rotate-half). `w` is [rows, ...]
// or [rows] with rows = heads * head_dim and head_dim even; returns a new
// contiguous tensor. INVALID_ARGUMENT when the rows do not split that way.
StatusOr<at::Tensor> RopeInterleavedToHalf(const at::Tensor& w, int64_t heads);
// Hugging Face (rotate-half) -> llama.cpp (interleaved); the inverse.
StatusOr<at::Tensor> RopeHalfToInterleaved(const at::Tensor& w, int64_t heads);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_ROPE_LAYOUT_H_
