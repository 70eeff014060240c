// Byte-level helpers the ggml block codecs share (ggml_types.cc,
// ggml_kquants.cc, ggml_weighted_quants.cc): little-endian fields, the 6-bit
// scale / min pairs of the Q4_K / Q5_K super-blocks, and the packing of
// codes into each block layout.
#ifndef QUANTD_WORKER_IO_GGUF_GGML_BLOCK_BITS_H_
#define QUANTD_WORKER_IO_GGUF_GGML_BLOCK_BITS_H_

#include <cstdint>

#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf::bits {

inline uint16_t LoadU16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

inline uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

inline void StoreU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
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

// 32 five-bit codes as Q5_0 / Q5_1 store them: low nibbles paired as in
// Q4_0, fifth bits gathered into a little-endian 32-bit word.
inline void PackFiveBitCodes(const uint8_t* codes, uint8_t* qh_dst, uint8_t* qs_dst) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs_dst[j] = static_cast<uint8_t>((codes[j] & 0x0F) | (codes[j + 16] & 0x0F) << 4);
    qh |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((codes[j + 16] >> 4) & 1) << (j + 16);
  }
  StoreU32(qh_dst, qh);
}

// The eight 6-bit scales `ls` and mins `lm` of a Q4_K / Q5_K super-block as
// its 12 scale bytes (the inverse of ScaleMinK4).
inline void PackScalesMinsK4(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < 12; ++j) scales[j] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q4_K's 256 codes (0..15) as 128 bytes: elements l and l + 32 of each 64
// in the low and high nibbles.
inline void PackQ4KCodes(const uint8_t* codes, uint8_t* q) {
  for (int j = 0; j < 256; j += 64, q += 32)
    for (int l = 0; l < 32; ++l)
      q[l] = static_cast<uint8_t>(codes[j + l] | (codes[j + l + 32] << 4));
}

// Q5_K's 256 codes (0..31): Q4_K's nibbles in `ql` plus each code's fifth
// bit in `qh` (bit pair 2k, 2k+1 for the k-th 64 elements).
inline void PackQ5KCodes(const uint8_t* codes, uint8_t* qh, uint8_t* ql) {
  for (int j = 0; j < 32; ++j) qh[j] = 0;
  uint8_t m1 = 1, m2 = 2;
  for (int j = 0; j < 256; j += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
    for (int l = 0; l < 32; ++l) {
      int l1 = codes[j + l], l2 = codes[j + l + 32];
      if (l1 > 15) {
        l1 -= 16;
        qh[l] |= m1;
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[l] |= m2;
      }
      ql[l] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
  }
}

// Q6_K's 256 codes (0..63): low nibbles in `ql` (128 bytes), high bit pairs
// in `qh` (64 bytes), per 128 elements.
inline void PackQ6KCodes(const int8_t* codes, uint8_t* ql, uint8_t* qh) {
  for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t c0 = codes[j + l], c1 = codes[j + l + 32], c2 = codes[j + l + 64],
                    c3 = codes[j + l + 96];
      ql[l] = static_cast<uint8_t>((c0 & 0xF) | ((c2 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((c1 & 0xF) | ((c3 & 0xF) << 4));
      qh[l] =
          static_cast<uint8_t>((c0 >> 4) | ((c1 >> 4) << 2) | ((c2 >> 4) << 4) | ((c3 >> 4) << 6));
    }
  }
}

// The 2-bit codes of Q2_K and the low bits of Q3_K: byte l of each 32-byte
// group holds codes l, l + 32, l + 64, l + 96 of its 128 (low bits first).
inline void PackCrumbs(const uint8_t* codes, uint8_t* qs) {
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(codes[j + l] | (codes[j + l + 32] << 2) |
                                           (codes[j + l + 64] << 4) | (codes[j + l + 96] << 6));
    }
  }
}

// Q3_K's 256 codes (0..7, the value's integer plus 4): the high bit of code
// j in bit j / 32 of hmask[j % 32], the low bit pairs as crumbs in `qs`.
inline void PackQ3KCodes(const uint8_t* codes, uint8_t* hmask, uint8_t* qs) {
  for (int j = 0; j < 32; ++j) hmask[j] = 0;
  uint8_t low[256];
  for (int j = 0; j < 256; ++j) {
    low[j] = codes[j];
    if (low[j] > 3) {
      hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
      low[j] -= 4;
    }
  }
  PackCrumbs(low, qs);
}

}  // namespace quantd::gguf::bits

#endif  // QUANTD_WORKER_IO_GGUF_GGML_BLOCK_BITS_H_
