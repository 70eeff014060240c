// SafetensorsWriter: writes a safetensors file one tensor at a time.
//
// Export code produces tensors block by block and must not hold a whole model
// in memory, but the safetensors header (which lists every tensor) comes
// first in the file. By default the writer therefore streams tensor bytes
// into a side file next to the destination, keeps only the header entries in
// memory, and on Finish() writes "<path>.tmp" = length + header + data, then
// renames it over `path`, so readers never see a half-written checkpoint.
// When the caller knows every tensor up front (SafetensorsWriterOptions::
// plan), the header is written first and the bytes go straight to
// "<path>.tmp", halving the I/O. Tensors are
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

struct PlannedTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;
};

struct SafetensorsWriterOptions {
  // Written as "__metadata__" (e.g. {"format": "pt"}).
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  // Optional: every tensor the file will hold, in the order Add() will be
  // called. Add() then refuses anything else, and Finish() refuses a file
  // with planned tensors missing. SetMetadata() is not available.
  std::vector<PlannedTensor> plan;
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
  // INVALID_ARGUMENT for a duplicate or reserved name, a size mismatch, a
  // tensor other than the plan's next one; FAILED_PRECONDITION after
  // Finish().
  Status Add(const std::string& name, SafetensorsDtype dtype, const std::vector<int64_t>& shape,
             const void* data, uint64_t nbytes);
  // Ignored in planned mode (the header is already written).
  void SetMetadata(const std::string& key, const std::string& value);

  // Writes the file and renames it into place. Call once.
  Status Finish();

  const std::string& path() const { return path_; }
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  SafetensorsWriter(std::string path, SafetensorsWriterOptions options, std::FILE* data);
  std::string HeaderJson(const std::vector<SafetensorsEntry>& entries) const;
  Status FinishPlanned();

  std::string path_;
  std::string data_path_;
  SafetensorsWriterOptions options_;
  std::FILE* data_ = nullptr;
  uint64_t data_bytes_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::set<std::string> names_;
  bool finished_ = false;
  bool planned_ = false;
  std::vector<SafetensorsEntry> plan_;  // planned mode: offsets fixed up front
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_SAFETENSORS_SAFETENSORS_WRITER_H_
