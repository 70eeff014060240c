// The format table: one row per DataType holding every fact the engine
// knows about that element format (its name, family, bits, signedness,
// code range, minifloat layout and special encodings), in the spirit of
// llama.cpp's ggml `type_traits`. spec.h's per-type functions (BitWidth,
// IntRangeOf, MinifloatFormatOf, IsMxType, ...) are lookups in it, and the
// fake-quant entry points pick their kernels by the row's family
// (format_kernels.h), so a new format is one row here plus, for a new
// family, one row of kernels there.
//
// Torch-free, like spec.h (the server links it), and usable from the CUDA
// kernels' headers. docs/worker.md describes the formats.
#ifndef QUANTD_WORKER_QUANT_FORMAT_TABLE_H_
#define QUANTD_WORKER_QUANT_FORMAT_TABLE_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "worker/quant/spec.h"

namespace quantd::quant {

// The families of formats; each has its own kernel file (int_quant.cc,
// fp8.cc, mx.cc, cast.cc). kUnknown is only the family of FormatOf's row
// for a value outside the DataType enum.
enum class FormatFamily {
  kInt,   // int2..int8, uint2..uint8: scale and zero point per slot
  kFp8,   // fp8_e4m3, fp8_e5m2: a float scale per slot
  kMx,    // the OCP MX formats: blocks of 32 sharing an E8M0 scale
  kCast,  // float16, bfloat16: a plain cast
  kUnknown,
};

// The special encodings of a minifloat: e4m3fn has NaN (S.1111.111) and no
// infinity, e5m2 is IEEE-like (infinity and NaN at exponent 31), FP6 / FP4
// have neither.
enum class MinifloatKind { kE4M3Fn, kE5M2, kFinite };

struct FormatRow {
  DataType dtype;
  std::string_view name;  // DataTypeName: "int4", "fp8_e4m3", "mxfp4", ...
  FormatFamily family;
  int bits;        // bits per stored element (16 for the casts; MX scales not counted)
  bool is_signed;  // the element holds negative values (everything but uint*)
  // Integer codes, and MXINT8 elements (symmetric, in units of 2^-6);
  // {0, 0} for the float formats.
  IntRange code_range;
  // FP8 and MX elements (MXINT8: ebits 0, mbits 8, max_norm 127); all zero
  // for integers and casts.
  MinifloatFormat minifloat;
  MinifloatKind minifloat_kind;  // kFinite where there is no minifloat
  // MX: the reference's name of the element dtype ("fp4", "int8", ...);
  // empty for the other families.
  std::string_view reference_element_name;

  constexpr bool has_inf() const { return minifloat_kind == MinifloatKind::kE5M2; }
  constexpr bool has_nan() const { return minifloat_kind != MinifloatKind::kFinite; }
};

// Rows of the table, one per DataType value, in enum order (kBFloat16 is the
// last value; format_table_test holds the table to the enum).
inline constexpr size_t kNumDataTypes = static_cast<size_t>(DataType::kBFloat16) + 1;
const std::array<FormatRow, kNumDataTypes>& FormatTable();

// The row of `t`. A value outside the enum gets a row named "unknown" of
// family kUnknown (8 bits, nothing else set), which every predicate refuses.
const FormatRow& FormatOf(DataType t);

// The row whose name is `name` (exact, lower case) or whose
// reference_element_name is `element`; nullopt when none.
std::optional<DataType> FindFormatByName(std::string_view name);
std::optional<DataType> FindMxFormatByElementName(std::string_view element);

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_FORMAT_TABLE_H_
