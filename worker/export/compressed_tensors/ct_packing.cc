#include "worker/export/compressed_tensors/ct_packing.h"

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace quantd::exporter {

namespace {

int64_t WordsFor(int64_t n, int bits) { return (n * bits + 31) / 32; }

}  // namespace

StatusOr<at::Tensor> PackCtInt32(const at::Tensor& codes, int bits, int packed_dim) {
  if (bits < 1 || bits > 8) return InvalidArgumentError("ct pack: bits must be 1..8");
  if (codes.dim() != 2) return InvalidArgumentError("ct pack: codes must be 2-D");
  if (packed_dim != 0 && packed_dim != 1) return InvalidArgumentError("ct pack: packed_dim 0 or 1");
  try {
    // Rows along which to pack: the packed axis last.
    at::Tensor v = (packed_dim == 0 ? codes.t() : codes).to(at::kLong).contiguous();
    const int64_t rows = v.size(0), n = v.size(1), words = WordsFor(n, bits);
    const int64_t offset = int64_t{1} << (bits - 1);
    const int64_t mask = (int64_t{1} << bits) - 1;
    at::Tensor out = at::zeros({rows, words}, at::kInt);
    const int64_t* src = v.data_ptr<int64_t>();
    int32_t* dst = out.data_ptr<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t* row = reinterpret_cast<uint32_t*>(dst + r * words);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t q = src[r * n + i];
        if (q < -offset || q >= offset)
          return InvalidArgumentError("ct pack: code " + std::to_string(q) + " outside " +
                                      std::to_string(bits) + "-bit signed range");
        const uint64_t u = static_cast<uint64_t>(q + offset) & static_cast<uint64_t>(mask);
        const int64_t bit = i * bits;
        const int64_t w = bit / 32, shift = bit % 32;
        row[w] |= static_cast<uint32_t>(u << shift);
        if (shift + bits > 32) row[w + 1] |= static_cast<uint32_t>(u >> (32 - shift));
      }
    }
    return packed_dim == 0 ? out.t().contiguous() : out;
  } catch (const c10::Error& e) {
    return InternalError(std::string("ct pack: ") + e.what_without_backtrace());
  }
}

StatusOr<at::Tensor> UnpackCtInt32(const at::Tensor& packed, int bits, int64_t n, int packed_dim) {
  if (bits < 1 || bits > 8) return InvalidArgumentError("ct unpack: bits must be 1..8");
  if (packed.dim() != 2 || packed.scalar_type() != at::kInt)
    return DataLossError("ct unpack: packed must be a 2-D int32 tensor");
  if (packed_dim != 0 && packed_dim != 1)
    return InvalidArgumentError("ct unpack: packed_dim 0 or 1");
  try {
    at::Tensor v = (packed_dim == 0 ? packed.t() : packed).contiguous();
    const int64_t rows = v.size(0), words = WordsFor(n, bits);
    if (v.size(1) != words)
      return DataLossError("ct unpack: " + std::to_string(v.size(1)) + " words for " +
                           std::to_string(n) + " elements of " + std::to_string(bits) +
                           " bits, expected " + std::to_string(words));
    const int64_t offset = int64_t{1} << (bits - 1);
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    at::Tensor out = at::empty({rows, n}, at::kChar);
    const uint32_t* src = reinterpret_cast<const uint32_t*>(v.data_ptr<int32_t>());
    int8_t* dst = out.data_ptr<int8_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const uint32_t* row = src + r * words;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t bit = i * bits;
        const int64_t w = bit / 32, shift = bit % 32;
        uint64_t u = row[w] >> shift;
        if (shift + bits > 32) u |= static_cast<uint64_t>(row[w + 1]) << (32 - shift);
        dst[r * n + i] = static_cast<int8_t>(static_cast<int64_t>(u & mask) - offset);
      }
    }
    return packed_dim == 0 ? out.t().contiguous() : out;
  } catch (const c10::Error& e) {
    return DataLossError(std::string("ct unpack: ") + e.what_without_backtrace());
  }
}

}  // namespace quantd::exporter
