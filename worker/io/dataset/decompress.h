// Whole compressed dataset files (c4's .json.gz, pile-val's .jsonl.zst),
// decompressed in memory under a size bound: the output never grows past
// max_bytes, whatever the input claims. Torch-free.
#ifndef QUANTD_WORKER_IO_DATASET_DECOMPRESS_H_
#define QUANTD_WORKER_IO_DATASET_DECOMPRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "worker/common/status.h"

namespace quantd::io {

enum class Compression { kNone, kGzip, kZstd };

// By the file name's last extension: .gz, .zst; anything else kNone.
Compression CompressionForPath(const std::string& path);
// `path` without a .gz / .zst extension.
std::string StripCompressionExtension(const std::string& path);

// All of `in` (gzip: members concatenated; zstd: frames concatenated).
// INVALID_ARGUMENT "dataset NAME: ..." for corrupt or truncated data;
// RESOURCE_EXHAUSTED when the output would pass max_bytes; CANCELLED when
// the thread's CancellationScope asks to stop.
StatusOr<std::string> Decompress(std::string_view in, Compression compression, uint64_t max_bytes,
                                 const std::string& name);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_DATASET_DECOMPRESS_H_
