// Bit packing of real-quantized codes as the reference toolkit's HF export
// stores them (pack_method "reorder"):
//
//  - 4-bit integers (int4 / uint4, weights and zero points): eight codes per
//    int32 along the last axis; nibble i (bits 4i..4i+3) of word c holds
//    element 8c + kReorder[i], kReorder = {0, 2, 4, 6, 1, 3, 5, 7}. A last
//    axis that is not a multiple of 8 is zero-padded. A 0-dim tensor is
//    stored as its int32 value.
//  - FP4 elements (MXFP4): two per byte, the even element in the low nibble.
//  - FP6 elements (MXFP6): four per three bytes, little-endian 24-bit word
//    v0 | v1 << 6 | v2 << 12 | v3 << 18.
//
// Codes come from quant::RealQuantize (int8 / uint8 holding the integer or
// the element's bit pattern). CPU tensors; every function has an inverse so
// the importer and the tests can read what the exporter wrote.
#ifndef QUANTD_WORKER_EXPORT_HF_QUARK_PACKING_H_
#define QUANTD_WORKER_EXPORT_HF_QUARK_PACKING_H_

#include <ATen/ATen.h>

#include <array>
#include <cstdint>

#include "worker/common/status.h"

namespace quantd::exporter {

// Which element of a group of eight each nibble of an int32 holds.
inline constexpr std::array<int, 8> kInt4Reorder = {0, 2, 4, 6, 1, 3, 5, 7};

// [..., n] int8 / uint8 -> [..., ceil(n/8)] int32 (0-dim -> 0-dim int32).
StatusOr<at::Tensor> PackInt4Reorder(const at::Tensor& codes);
// [..., ceil(n/8)] int32 -> [..., n] int8, sign-extended when `is_signed`
// (values [-8, 7]) else [0, 15]. 0-dim int32 passes through as int8.
StatusOr<at::Tensor> UnpackInt4Reorder(const at::Tensor& packed, int64_t n, bool is_signed);

// [..., n] uint8 (low 4 bits used) -> [..., ceil(n/2)] uint8.
StatusOr<at::Tensor> PackFp4Pairs(const at::Tensor& codes);
StatusOr<at::Tensor> UnpackFp4Pairs(const at::Tensor& packed, int64_t n);

// [..., n] uint8 (low 6 bits used), n % 4 == 0 -> [..., n / 4 * 3] uint8.
// INVALID_ARGUMENT when n is not a multiple of 4.
StatusOr<at::Tensor> PackFp6(const at::Tensor& codes);
StatusOr<at::Tensor> UnpackFp6(const at::Tensor& packed, int64_t n);

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_QUARK_PACKING_H_
