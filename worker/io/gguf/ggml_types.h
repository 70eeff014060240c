// ggml tensor types: the element and block formats GGUF files store.
//
// Each block format is declared once here: its type id, block size and byte
// size, and (in ggml_types.cc) its scalar dequantization, written to follow
// ggml's reference dequantize_row_* functions operation for operation so the
// floats are bit-identical. The formats the exporter writes (Q8_0, Q4_0,
// Q4_1) also have ggml's reference quantizers and block writers for codes
// computed elsewhere, beside their dequantizers. Torch-free, so the GGUF
// parser and fuzzers can use it.
#ifndef QUANTD_WORKER_IO_GGUF_GGML_TYPES_H_
#define QUANTD_WORKER_IO_GGUF_GGML_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "worker/common/status.h"

namespace quantd::gguf {

// Values are ggml's enum ggml_type (they are what GGUF files store).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  // 36..38 (IQ4_NL_4_4, _4_8, _8_8) were removed from ggml.
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;     // ggml's name, upper case: "F32", "Q4_K"
  int64_t block_size;   // elements per block (1 for plain types)
  size_t type_size;     // bytes per block
  bool can_dequantize;  // DequantizeRow supports it
};

// Traits of a type id read from a file; nullopt for ids ggml does not define.
std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id);
const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type);
// nullopt when no type has that name.
std::optional<GgmlType> GgmlTypeFromName(const std::string& name);

// Bytes that `n_elements` of `type` occupy; INVALID_ARGUMENT when n is not a
// multiple of the block size or the size overflows.
StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n_elements);

// IEEE half and bfloat16 <-> float, exact (subnormals, inf and NaN kept).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);  // round to nearest even, as ggml's converter
float Bf16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float f);  // round to nearest even; NaN stays quiet NaN

// Dequantizes `n` elements (a multiple of the block size) from `src` into
// `dst`. `src` must hold GgmlRowBytes(type, n) bytes. UNIMPLEMENTED for types
// whose dequantization is not built (named in the message).
Status DequantizeRow(GgmlType type, const uint8_t* src, float* dst, int64_t n);

// Encodes `n` floats as `type` into `dst` (GgmlRowBytes(type, n) bytes).
// Built for F32, F16 and BF16 (round to nearest even) and, with ggml's
// reference quantizers below, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
// Q4_K, Q5_K and Q6_K.
// UNIMPLEMENTED, naming the type, for the others.
Status QuantizeRow(GgmlType type, const float* src, uint8_t* dst, int64_t n);

// `rows` rows of `n_per_row` floats as `type`, row after row (GgmlRowBytes
// of each row). With `importance` (n_per_row weights, one per column: an
// importance matrix's mean squared activations), Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K, Q3_K, Q4_K, Q5_K and Q6_K use ggml's importance-weighted quantizers
// (quantize_row_*_impl, the ones llama.cpp uses with an imatrix), byte-
// identical to ggml_quantize_chunk given the same weights; the other types
// ignore it, as ggml does. Null importance: QuantizeRow.
Status QuantizeRows(GgmlType type, const float* src, uint8_t* dst, int64_t rows, int64_t n_per_row,
                    const float* importance);

// ggml's reference quantizers (quantize_row_*_ref), operation for operation,
// so a file quantized here is byte-identical to llama.cpp's. `n` is a
// multiple of 32; every block of 32 is encoded on its own:
//   Q8_0: amax = max |x|, d = amax / 127, q = roundf(x * (1/d)) (half away
//         from zero; q = 0 when d = 0).
//   Q4_0: max = the element of largest magnitude (first one on ties),
//         d = max / -8, q = min(15, (int8)(x * (1/d) + 8.5)).
//   Q4_1: d = (max - min) / 15, m = min,
//         q = min(15, (int8)((x - min) * (1/d) + 0.5)).
//   Q5_0: as Q4_0 with d = max / -16, q = min(31, (int8)(x * (1/d) + 16.5)).
//   Q5_1: as Q4_1 with d = (max - min) / 31, q = (uint8)((x - min) * (1/d) + 0.5).
// d and m are stored as fp16 (round to nearest even).
void QuantizeRowQ8_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ4_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ4_1(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ5_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ5_1(const float* src, uint8_t* dst, int64_t n);

// ggml's reference K-quant quantizers (ggml_kquants.cc), `n` a multiple of
// 256, byte-identical to quantize_row_q{4,5,6}_K_ref:
//   Q4_K / Q5_K: per 32-element sub-block a scale and a min fitted by
//         weighted least squares (make_qkx2_quants, weights sqrt(mean x^2)
//         + |x|), stored as 6-bit multiples of the super-block's fp16 d and
//         dmin; codes 0..15 / 0..31.
//   Q6_K: per 16-element sub-block the best of 19 trial scales
//         (make_qx_quants, weights x^2), stored as int8 multiples of fp16 d;
//         codes -32..31.
void QuantizeRowQ4_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ5_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ6_K(const float* src, uint8_t* dst, int64_t n);
//   Q2_K: per 16-element sub-block a scale and a min fitted by weighted
//         least absolute error (make_qkx2_quants with use_mad, weights
//         |x|), stored as 4-bit multiples of fp16 d and dmin; codes 0..3.
//   Q3_K: per 16-element sub-block a signed scale refined by moving single
//         codes (make_q3_quants), stored as 6-bit multiples of fp16 d;
//         codes -4..3.
void QuantizeRowQ2_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ3_K(const float* src, uint8_t* dst, int64_t n);

// The importance-weighted quantizers of one row of `n` elements
// (ggml_weighted_quants.cc, ggml_kquants.cc); `importance` holds n weights.
void QuantizeRowQ4_0Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ4_1Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ5_0Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ5_1Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ4_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ5_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ6_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ2_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance);
void QuantizeRowQ3_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance);

// One block from codes computed elsewhere (an exporter keeping a job's own
// codes): 32 codes plus the block's d (and m), stored as fp16.
//   Q8_0: codes in [-128, 127], x = code * d.
//   Q4_0: nibbles in [0, 15], x = (nibble - 8) * d.
//   Q4_1: nibbles in [0, 15], x = nibble * d + m.
void WriteBlockQ8_0(const int8_t* codes, float d, uint8_t* dst);
void WriteBlockQ4_0(const uint8_t* nibbles, float d, uint8_t* dst);
void WriteBlockQ4_1(const uint8_t* nibbles, float d, float m, uint8_t* dst);
//   MXFP4: 32 FP4 (e2m1) element codes, sign in bit 3 (the OCP MX bit
//   pattern), and the block's E8M0 exponent byte e: x = e2m1(code) * 2^(e-127).
void WriteBlockMXFP4(const uint8_t* codes, uint8_t e, uint8_t* dst);

// The individual reference dequantizers, ggml's block layouts:
//   Q4_0: 32 elements, {fp16 d; u8 qs[16]}, x = (nibble - 8) * d, low nibbles
//         first (elements 0..15), then high nibbles (16..31).
//   Q4_1: 32 elements, {fp16 d, m; u8 qs[16]}, x = nibble * d + m.
//   Q5_0: 32 elements, {fp16 d; u8 qh[4]; u8 qs[16]}, x = (q - 16) * d with
//         q's low nibble as in Q4_0 and its fifth bit in bit j of qh.
//   Q5_1: 32 elements, {fp16 d, m; u8 qh[4]; u8 qs[16]}, x = q * d + m.
//   Q8_0: 32 elements, {fp16 d; i8 qs[32]}, x = q * d.
//   Q4_K: 256 elements, {fp16 d, dmin; u8 scales[12]; u8 qs[128]}: eight
//         sub-blocks of 32 with 6-bit scales and mins.
//   Q6_K: 256 elements, {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}.
//   MXFP4: 32 elements, {u8 e; u8 qs[16]}, element j in the low nibble of
//         qs[j] and element j + 16 in its high nibble, x = kvalues[nibble] *
//         2^(e-128) with kvalues the doubled e2m1 values (ggml-common.h).
void DequantizeRowQ4_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ4_1(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ5_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ5_1(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ8_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ4_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ6_K(const uint8_t* src, float* dst, int64_t n);
//   Q5_K: 256 elements, {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}.
void DequantizeRowQ5_K(const uint8_t* src, float* dst, int64_t n);
//   Q2_K: 256 elements, {u8 scales[16]; u8 qs[64]; fp16 d, dmin}: sixteen
//         sub-blocks of 16, x = d * (s & 15) * q - dmin * (s >> 4), q 0..3.
//   Q3_K: 256 elements, {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d}:
//         sixteen sub-blocks of 16 with 6-bit scales (stored + 32),
//         x = d * scale * q, q -4..3 from two low bits and a high bit.
void DequantizeRowQ2_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ3_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowMXFP4(const uint8_t* src, float* dst, int64_t n);

}  // namespace quantd::gguf

#endif  // QUANTD_WORKER_IO_GGUF_GGML_TYPES_H_
