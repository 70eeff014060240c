// ModelOptions: how the engine materialises a model's weights and runs it.
#ifndef QUANTD_WORKER_MODELS_MODEL_OPTIONS_H_
#define QUANTD_WORKER_MODELS_MODEL_OPTIONS_H_

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>

namespace quantd::models {

struct ModelOptions {
  // Weights and activations are held in this dtype (norm statistics and
  // softmax always run in float32).
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
  // A block's Forward runs at most this many tokens at once (whole samples;
  // at least one sample), bounding MLP activations; linear hooks then see
  // one sub-batch per call.
  int64_t max_tokens_per_chunk = 8192;
  // Attention scores are materialised in pieces of at most this many
  // elements (per sample, per query tile) so long contexts stay bounded.
  int64_t max_attention_elements = int64_t{1} << 20;

  // The defaults for running on `device`. On a GPU attention takes one
  // 2048-token sample of 32 heads per tile (2^27 score elements, 512 MiB in
  // float32): the CPU's budget cut each such sample into 128 tiles of a
  // dozen launches, and the H100 8B run of docs/performance.md kept its GPU
  // busy 29% of the block loop.
  static ModelOptions For(at::Device device) {
    ModelOptions o;
    o.device = device;
    if (!device.is_cpu()) o.max_attention_elements = int64_t{1} << 27;
    return o;
  }

  // Samples of seq_len tokens per sub-batch under max_tokens_per_chunk.
  int64_t SamplesPerChunk(int64_t seq_len) const {
    return std::max<int64_t>(1, max_tokens_per_chunk / seq_len);
  }
};

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_MODEL_OPTIONS_H_
