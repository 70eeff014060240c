// SafetensorsWriter: writes a safetensors file one tensor at a time.
//
// Export code produces tensors block by block and must not hold a whole model
// in memory, but the safetensors header (which lists every tensor) comes
// first in the file. The writer therefore streams tensor bytes into a
// side file next to the destination, keeps only the header entries in memory,
// and on Finish() writes "<path>.tmp" = length + header + data, then renames
// it over `path`, so readers never see a half-written checkpoint. Tensors are
// laid out back to back in insertion order (the layout strict readers
// require); the header is padded with spaces to a multiple of 8 bytes.
// Torch-free: callers pass raw little-endian bytes (see tensor_io.h for the
// at::Tensor overload).
#ifndef QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_WRITER_H_
#define QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/safetensors/safetensors_format.h"

namespace quantd::io {

struct SafetensorsWriterOptions {
  // Written as "__metadata__" (e.g. {"format": "pt"}).
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
};

class SafetensorsWriter {
 public:
  // Opens the side file "<path>.data.tmp". FAILED_PRECONDITION when the
  // directory is not writable.
  static StatusOr<std::unique_ptr<SafetensorsWriter>> Create(const std::string& path,
                                                             SafetensorsWriterOptions options = {});
  // Removes the side files when Finish() was not called.
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends one tensor. `nbytes` must equal numel(shape) x element size.
  // INVALID_ARGUMENT for a duplicate or reserved name, a size mismatch, or a
  // call after Finish().
  Status Add(const std::string& name, SafetensorsDtype dtype, const std::vector<int64_t>& shape,
             const void* data, uint64_t nbytes);
  void SetMetadata(const std::string& key, const std::string& value);

  // Writes the file and renames it into place. Call once.
  Status Finish();

  const std::string& path() const { return path_; }
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  SafetensorsWriter(std::string path, SafetensorsWriterOptions options, std::FILE* data);
  std::string HeaderJson() const;

  std::string path_;
  std::string data_path_;
  SafetensorsWriterOptions options_;
  std::FILE* data_ = nullptr;
  uint64_t data_bytes_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::set<std::string> names_;
  bool finished_ = false;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_WRITER_H_
