// GgufWriter: writes GGUF v3 files (metadata, tensor directory, aligned data).
//
// Torch-free. Tensors are declared up front (name, ggml shape, type) with a
// producer that yields their bytes when the data section is written, so an
// exporter can stream one tensor at a time. The file is written to a
// temporary name and renamed into place only when complete.
#ifndef QUANTD_WORKER_EXPORT_GGUF_GGUF_WRITER_H_
#define QUANTD_WORKER_EXPORT_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/gguf/ggml_types.h"
#include "worker/io/gguf/gguf_file.h"

namespace quantd::gguf {

class GgufWriter {
 public:
  // Fills `bytes` with the tensor's data (exactly its GgmlRowBytes size).
  using Producer = std::function<Status(std::vector<uint8_t>* bytes)>;

  explicit GgufWriter(uint32_t alignment = 32);

  // Sets (or replaces) a metadata value; keys keep their first-set order.
  void Set(const std::string& key, GgufValue value);
  // Declares a tensor. INVALID_ARGUMENT for a duplicate name, more than 4
  // dimensions, or a row that is not whole blocks of `type`.
  Status AddTensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                   Producer produce);
  // Convenience: encodes float data (ggml element order) as `type`.
  Status AddFloatTensor(const std::string& name, std::vector<int64_t> ne, GgmlType type,
                        std::vector<float> data);

  // Writes the file atomically. A producer's error, or bytes of the wrong
  // size, aborts the write (naming the tensor) and leaves nothing at `path`.
  Status Write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    uint64_t nbytes;
    Producer produce;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_EXPORT_GGUF_GGUF_WRITER_H_
