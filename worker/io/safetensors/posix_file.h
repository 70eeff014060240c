// ReadOnlyFile: a file descriptor opened for positional reads.
//
// Checkpoint readers fetch one tensor's byte range at a time with pread, so
// the process never maps more than it is reading (a worker may run under an
// address-space limit smaller than the checkpoint). A short read is reported
// as DATA_LOSS (the file was truncated), never as garbage data.
#ifndef QUANTD_WORKER_IO_SAFETENSORS_POSIX_FILE_H_
#define QUANTD_WORKER_IO_SAFETENSORS_POSIX_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "worker/common/status.h"

namespace quantd::io {

class ReadOnlyFile {
 public:
  // NOT_FOUND when the file does not exist, PERMISSION_DENIED when it cannot
  // be read, FAILED_PRECONDITION for a directory.
  static StatusOr<std::unique_ptr<ReadOnlyFile>> Open(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  const std::string& path() const { return path_; }
  // Size at open time.
  uint64_t size() const { return size_; }
  // Reads exactly `n` bytes at `offset` into `dst`. Thread-safe.
  Status ReadAt(uint64_t offset, uint64_t n, void* dst) const;

 private:
  ReadOnlyFile(int fd, std::string path, uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size) {}
  int fd_;
  std::string path_;
  uint64_t size_;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_SAFETENSORS_POSIX_FILE_H_
