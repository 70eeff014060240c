// Byte-level helpers the ggml block codecs share (ggml_types.cc,
// ggml_kquants.cc): little-endian fp16 fields and the 6-bit scale / min
// pairs of the Q4_K / Q5_K super-blocks.
#ifndef QUANTD_WORKER_IO_GGUF_GGML_BLOCK_BITS_H_
#define QUANTD_WORKER_IO_GGUF_GGML_BLOCK_BITS_H_

#include <cstdint>

#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf::bits {

inline uint16_t LoadU16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

inline float LoadFp16(const uint8_t* p) { return Fp16ToFp32(LoadU16(p)); }

inline void StoreFp16(uint8_t* p, float f) {
  const uint16_t h = Fp32ToFp16(f);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// ggml's get_scale_min_k4: the j-th 6-bit scale and min of the 12 packed
// bytes of a Q4_K / Q5_K block.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

}  // namespace quantd::gguf::bits

#endif  // QUANTD_WORKER_IO_GGUF_GGML_BLOCK_BITS_H_
