#include "worker/io/safetensors/posix_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace quantd::io {

StatusOr<std::unique_ptr<ReadOnlyFile>> ReadOnlyFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = path + ": " + std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return NotFoundError(msg);
    if (err == EACCES || err == EPERM) return PermissionDeniedError(msg);
    return FailedPreconditionError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FailedPreconditionError(path + ": fstat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return FailedPreconditionError(path + ": not a regular file");
  }
  return std::unique_ptr<ReadOnlyFile>(
      new ReadOnlyFile(fd, path, static_cast<uint64_t>(st.st_size)));
}

ReadOnlyFile::~ReadOnlyFile() { ::close(fd_); }

Status ReadOnlyFile::ReadAt(uint64_t offset, uint64_t n, void* dst) const {
  // pread transfers at most ~2 GiB per call on Linux; loop until done.
  constexpr uint64_t kMaxChunk = 1ull << 30;
  auto* out = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const size_t want = static_cast<size_t>(std::min(n - done, kMaxChunk));
    const ssize_t got = ::pread(fd_, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return DataLossError(path_ + ": read of " + std::to_string(n) + " bytes at offset " +
                           std::to_string(offset) + " failed: " + std::strerror(errno));
    }
    if (got == 0) {
      return DataLossError(path_ + ": file ends after " + std::to_string(offset + done) +
                           " bytes, but " + std::to_string(n) + " bytes at offset " +
                           std::to_string(offset) + " were expected (truncated file?)");
    }
    done += static_cast<uint64_t>(got);
  }
  return OkStatus();
}

}  // namespace quantd::io
