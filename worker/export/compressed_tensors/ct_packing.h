// Integer codes packed into int32 words as the compressed-tensors library's
// pack-quantized compressor stores them (compressors/pack_quantized/helpers.py,
// pack_to_int32 / unpack_from_int32, vllm-project/compressed-tensors at
// ac8e2ba82f4e0d5eaa40069f8fc642738f124cd4), the layout vLLM's WNA16 scheme
// reads as uint4b8 / uint8b128:
//
//  - a signed code q of `bits` bits is stored as q + 2^(bits-1) (unsigned);
//  - along the packed axis, element i occupies bits i*bits .. i*bits+bits-1
//    of the row's little-endian bit stream, i.e. for 4 bits element i sits
//    in nibble i % 8 of word i / 8 (no reordering); a value that crosses a
//    word boundary (bits 3, 5, 6, 7) continues in the next word's low bits;
//  - a row is ceil(n * bits / 32) words; bits past the last element are 0.
//
// Weights pack along the input axis (the last); zero points along the output
// axis (axis 0, pack_to_int32(..., packed_dim=0)).
#ifndef QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_PACKING_H_
#define QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_PACKING_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "worker/common/status.h"

namespace quantd::exporter {

// 2-D integer codes in [-2^(bits-1), 2^(bits-1) - 1] (any integer dtype),
// `bits` in 1..8. packed_dim 1: [rows, n] -> [rows, ceil(n*bits/32)] int32;
// packed_dim 0: [n, cols] -> [ceil(n*bits/32), cols]. INVALID_ARGUMENT for a
// code out of range, a tensor that is not 2-D or a bad `bits`.
StatusOr<at::Tensor> PackCtInt32(const at::Tensor& codes, int bits, int packed_dim = 1);

// The inverse: `n` elements along packed_dim, int8 codes (signed range).
// DATA_LOSS when `packed` has the wrong word count.
StatusOr<at::Tensor> UnpackCtInt32(const at::Tensor& packed, int bits, int64_t n,
                                   int packed_dim = 1);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_COMPRESSED_TENSORS_CT_PACKING_H_
