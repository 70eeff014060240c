// TensorSource: a read-only set of named tensors behind a checkpoint.
//
// Safetensors checkpoints (single file or sharded) and GGUF files both present
// themselves through this interface, with Hugging Face tensor names, so the
// model code loads weights the same way whatever the file format. Loads are
// lazy: nothing is read until Load() asks for one tensor.
#ifndef QUANTD_WORKER_IO_TENSOR_SOURCE_H_
#define QUANTD_WORKER_IO_TENSOR_SOURCE_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io {

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  // Storage dtype as the file names it: "F32", "F16", "BF16", "I8", "U8",
  // "I32", "F8_E4M3", ... for safetensors; "F32", "Q8_0", "Q4_K", ... for GGUF.
  std::string dtype;
  std::string file;     // path of the file holding it (for error messages)
  uint64_t nbytes = 0;  // bytes in the file
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // Every tensor name, sorted.
  virtual std::vector<std::string> Names() const = 0;
  // nullptr when there is no such tensor.
  virtual const TensorInfo* Find(const std::string& name) const = 0;
  // Reads one tensor into a new, owned, contiguous CPU tensor of `dtype`
  // (converting from the storage dtype; quantized GGUF blocks are
  // dequantized). NOT_FOUND names the tensor and the source; a corrupt or
  // out-of-range entry is DATA_LOSS naming the file and the tensor.
  virtual StatusOr<at::Tensor> Load(const std::string& name,
                                    at::ScalarType dtype = at::kFloat) const = 0;
  // Free-form metadata (safetensors __metadata__, GGUF key/values as text).
  virtual std::map<std::string, std::string> Metadata() const { return {}; }
  // Human-readable origin, e.g. the directory or file path.
  virtual std::string Description() const = 0;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TENSOR_SOURCE_H_
