// The reconstruction grid of a quantized ggml block: for each element, the
// value every code decodes to under the block's stored scales. An algorithm
// that chooses codes itself (GPTQ with a K-quant as its quantizer) fits a
// block with ggml's quantizer, reads its grid, picks each element's code, and
// writes the codes back into the block; DequantizeRow of that block then
// gives exactly the values the algorithm used.
//
// Every supported type decodes element e of a block as
//   step[e / 16] * float(code + offset) + base[e / 16]
// with the arithmetic of its ggml dequantizer (ggml_types.cc), so the values
// are bit-identical to DequantizeRow's: scales are uniform over 16-element
// granules in every type (Q2_K, Q3_K, Q6_K sub-blocks are 16 wide; Q4_K and
// Q5_K sub-blocks and the 32-element blocks span two granules).
#ifndef QUANTD_WORKER_IO_GGUF_GGML_BLOCK_GRID_H_
#define QUANTD_WORKER_IO_GGUF_GGML_BLOCK_GRID_H_

#include <cstdint>
#include <optional>

#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {

inline constexpr int kGridGranule = 16;

struct GgmlCodeRange {
  int levels;  // codes 0 .. levels - 1 as stored
  int offset;  // the integer a code stands for is code + offset
};

// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; nullopt for
// the other types (float types have no codes; MXFP4 and the IQ types have
// non-uniform grids).
std::optional<GgmlCodeRange> GgmlGridCodes(GgmlType type);

// The grid of one block of `type` (GgmlGridCodes defined): block_size / 16
// granules of `step` and `base`.
void GgmlBlockGrid(GgmlType type, const uint8_t* block, float* step, float* base);

// The value code `code` decodes to in a granule, as the dequantizer computes
// it.
inline float GgmlGridValue(float step, float base, int code, int offset) {
  return step * static_cast<float>(code + offset) + base;
}

// Overwrites the codes of one block with `codes` (block_size of them, each
// in 0 .. levels - 1), leaving its scales as they are.
void GgmlSetBlockCodes(GgmlType type, const uint8_t* codes, uint8_t* block);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_GGML_BLOCK_GRID_H_
