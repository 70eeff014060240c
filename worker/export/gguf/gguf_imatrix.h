// llama.cpp's importance-matrix file (what llama-imatrix writes and
// llama-quantize --imatrix reads): a GGUF with general.type "imatrix", per
// weight "<tensor>.in_sum2" (F32 [n_in, 1]: the sum of each input column's
// squared activations) and "<tensor>.counts" (F32 [1, 1]: the tokens
// summed), and imatrix.datasets / imatrix.chunk_count / imatrix.chunk_size
// (tools/imatrix/imatrix.cpp and common/imatrix-loader.cpp of llama.cpp).
// A job with a llama.cpp recipe and calibration data writes one beside its
// GGUF, so the same statistics can quantize other recipes in llama.cpp.
// Torch-free.
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_IMATRIX_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_IMATRIX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::gguf {

struct ImatrixEntry {
  std::string tensor;  // llama.cpp's name, e.g. "blk.0.attn_q.weight"
  std::vector<float> in_sum2;
  float count = 0;
};

struct ImatrixInfo {
  std::vector<std::string> datasets;  // file names of the calibration data
  uint32_t chunk_count = 0;           // calibration samples
  uint32_t chunk_size = 0;            // tokens per sample
};

// Writes `path` atomically; entries in the order given.
Status WriteImatrixGguf(const std::vector<ImatrixEntry>& entries, const ImatrixInfo& info,
                        const std::string& path);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_IMATRIX_H_
