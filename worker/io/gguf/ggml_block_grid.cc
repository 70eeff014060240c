#include "worker/io/gguf/ggml_block_grid.h"

#include "worker/io/gguf/ggml_block_bits.h"

namespace quantd::gguf {
namespace {

using bits::LoadFp16;

// Q4_0 / Q4_1 nibbles: element j low, element j + 16 high.
void PackNibbles(const uint8_t* codes, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
}

// The sixteen signed 6-bit scales of a Q3_K block, as its dequantizer
// unpacks them.
void Q3KScales(const uint8_t* packed, int8_t* scales) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    scales[j] = static_cast<int8_t>(low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4));
  }
}

}  // namespace

std::optional<GgmlCodeRange> GgmlGridCodes(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return GgmlCodeRange{16, -8};
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
      return GgmlCodeRange{16, 0};
    case GgmlType::kQ5_0:
      return GgmlCodeRange{32, -16};
    case GgmlType::kQ5_1:
    case GgmlType::kQ5_K:
      return GgmlCodeRange{32, 0};
    case GgmlType::kQ8_0:
      return GgmlCodeRange{256, -128};
    case GgmlType::kQ2_K:
      return GgmlCodeRange{4, 0};
    case GgmlType::kQ3_K:
      return GgmlCodeRange{8, -4};
    case GgmlType::kQ6_K:
      return GgmlCodeRange{64, -32};
    default:
      return std::nullopt;
  }
}

void GgmlBlockGrid(GgmlType type, const uint8_t* blk, float* step, float* base) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
      step[0] = step[1] = LoadFp16(blk);
      base[0] = base[1] = 0.0f;
      return;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
      step[0] = step[1] = LoadFp16(blk);
      base[0] = base[1] = LoadFp16(blk + 2);
      return;
    case GgmlType::kQ2_K: {
      const float d = LoadFp16(blk + 80), min = LoadFp16(blk + 82);
      for (int g = 0; g < 16; ++g) {
        step[g] = d * (blk[g] & 0xF);
        base[g] = -(min * (blk[g] >> 4));
      }
      return;
    }
    case GgmlType::kQ3_K: {
      const float d_all = LoadFp16(blk + 108);
      int8_t scales[16];
      Q3KScales(blk + 96, scales);
      for (int g = 0; g < 16; ++g) {
        step[g] = d_all * (scales[g] - 32);
        base[g] = 0.0f;
      }
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const float d = LoadFp16(blk), min = LoadFp16(blk + 2);
      for (int s = 0; s < 8; ++s) {
        uint8_t sc, m;
        bits::ScaleMinK4(s, blk + 4, &sc, &m);
        step[2 * s] = step[2 * s + 1] = d * sc;
        base[2 * s] = base[2 * s + 1] = -(min * m);
      }
      return;
    }
    case GgmlType::kQ6_K: {
      const float d = LoadFp16(blk + 208);
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
      for (int g = 0; g < 16; ++g) {
        step[g] = d * sc[g];
        base[g] = 0.0f;
      }
      return;
    }
    default:
      return;
  }
}

void GgmlSetBlockCodes(GgmlType type, const uint8_t* codes, uint8_t* blk) {
  switch (type) {
    case GgmlType::kQ4_0:
      PackNibbles(codes, blk + 2);
      return;
    case GgmlType::kQ4_1:
      PackNibbles(codes, blk + 4);
      return;
    case GgmlType::kQ5_0:
      bits::PackFiveBitCodes(codes, blk + 2, blk + 6);
      return;
    case GgmlType::kQ5_1:
      bits::PackFiveBitCodes(codes, blk + 4, blk + 8);
      return;
    case GgmlType::kQ8_0:
      for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(codes[j] - 128);
      return;
    case GgmlType::kQ2_K:
      bits::PackCrumbs(codes, blk + 16);
      return;
    case GgmlType::kQ3_K:
      bits::PackQ3KCodes(codes, blk, blk + 32);
      return;
    case GgmlType::kQ4_K:
      bits::PackQ4KCodes(codes, blk + 16);
      return;
    case GgmlType::kQ5_K:
      bits::PackQ5KCodes(codes, blk + 16, blk + 48);
      return;
    case GgmlType::kQ6_K:
      bits::PackQ6KCodes(reinterpret_cast<const int8_t*>(codes), blk, blk + 128);
      return;
    default:
      return;
  }
}

}  // namespace quantd::gguf
