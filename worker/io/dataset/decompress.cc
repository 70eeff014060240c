#include "worker/io/dataset/decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <memory>

#include "worker/common/cancellation.h"

namespace quantd::io {
namespace {

constexpr size_t kChunk = size_t{1} << 20;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status TooBig(const std::string& name, uint64_t max_bytes) {
  return ResourceExhaustedError("dataset " + name + " decompresses to more than the " +
                                std::to_string(max_bytes) + "-byte limit");
}

StatusOr<std::string> Gunzip(std::string_view in, uint64_t max_bytes, const std::string& name) {
  std::string out;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return InternalError("cannot start zlib");
  std::unique_ptr<z_stream, int (*)(z_stream*)> end(&zs, inflateEnd);
  size_t offset = 0;
  CancellationPoller poller(16);
  while (true) {
    if (poller.Due()) return CancelledStatus("decompressing dataset " + name);
    if (zs.avail_in == 0 && offset < in.size()) {
      const size_t n = std::min<size_t>(in.size() - offset, UINT32_MAX);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + offset));
      zs.avail_in = static_cast<uInt>(n);
      offset += n;
    }
    const size_t before = out.size();
    if (before >= max_bytes) return TooBig(name, max_bytes);
    const size_t room = std::min<uint64_t>(kChunk, max_bytes - before);
    out.resize(before + room);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(before + room - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 && offset == in.size()) return out;
      if (inflateReset(&zs) != Z_OK) break;  // the next gzip member
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue;  // room was full: grow
    break;
  }
  return InvalidArgumentError("dataset " + name + ": corrupt or truncated gzip data");
}

StatusOr<std::string> Unzstd(std::string_view in, uint64_t max_bytes, const std::string& name) {
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) return InternalError("cannot start zstd");
  // A frame may ask for a window up to 2^31; 128 MiB bounds the memory.
  ZSTD_DCtx_setParameter(ctx.get(), ZSTD_d_windowLogMax, 27);
  std::string out;
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  size_t pending = 0;  // non-zero while a frame is unfinished
  CancellationPoller poller(16);
  while (input.pos < input.size || pending != 0) {
    if (poller.Due()) return CancelledStatus("decompressing dataset " + name);
    const size_t before = out.size();
    if (before >= max_bytes) return TooBig(name, max_bytes);
    const size_t room = std::min<uint64_t>(kChunk, max_bytes - before);
    out.resize(before + room);
    ZSTD_outBuffer output{out.data() + before, room, 0};
    const size_t consumed = input.pos;
    pending = ZSTD_decompressStream(ctx.get(), &output, &input);
    out.resize(before + output.pos);
    if (ZSTD_isError(pending)) {
      return InvalidArgumentError("dataset " + name + ": corrupt zstd data (" +
                                  ZSTD_getErrorName(pending) + ")");
    }
    // Nothing in, nothing out: the last frame ends early.
    if (output.pos == 0 && input.pos == consumed)
      return InvalidArgumentError("dataset " + name + ": truncated zstd data");
  }
  return out;
}

}  // namespace

Compression CompressionForPath(const std::string& path) {
  if (EndsWith(path, ".gz")) return Compression::kGzip;
  if (EndsWith(path, ".zst")) return Compression::kZstd;
  return Compression::kNone;
}

std::string StripCompressionExtension(const std::string& path) {
  if (EndsWith(path, ".gz")) return path.substr(0, path.size() - 3);
  if (EndsWith(path, ".zst")) return path.substr(0, path.size() - 4);
  return path;
}

StatusOr<std::string> Decompress(std::string_view in, Compression compression, uint64_t max_bytes,
                                 const std::string& name) {
  switch (compression) {
    case Compression::kGzip:
      return Gunzip(in, max_bytes, name);
    case Compression::kZstd:
      return Unzstd(in, max_bytes, name);
    case Compression::kNone:
      break;
  }
  if (in.size() > max_bytes) return TooBig(name, max_bytes);
  return std::string(in);
}

}  // namespace quantd::io
